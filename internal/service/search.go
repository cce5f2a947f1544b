package service

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/skipq/skipq/internal/db"
)

// Search's filter states (docs/API.md#search): those of browsing, plus dead_lettered (a filter
// only: the messages dead-lettered into their queue and not received from
// it since, whose state is available or delayed there, as on every route)
// and acked (kept after its ack by a queue's retention).
const (
	StateDeadLettered = "dead_lettered"
	StateAcked        = "acked"
)

// SearchOptions filter GET /v1/messages; zero values filter nothing.
type SearchOptions struct {
	Queues      []string // exact names, at most MaxSearchQueueNames
	QueuePrefix string
	States      []string
	SentAfter   *time.Time // inclusive
	SentBefore  *time.Time // exclusive
	Tags        map[string]string
	MessageID   string
	GroupID     string // exact; FIFO queues' messages only
	Limit       int
	Cursor      string
}

const (
	// MaxSearchQueueNames is the most queue names one search may give.
	MaxSearchQueueNames = 20
	// maxSearchQueues bounds the queues one search walks: past it the
	// caller must narrow the search by queue or prefix.
	maxSearchQueues = 1000
	// searchScanBudget is how many index entries one search reads at most,
	// whatever its page size and number of queues, shared among its queues
	// (at least one each, so it must not be below maxSearchQueues): a rare
	// filter, or a page larger than the queues' shares hold, answers a
	// shorter page with a cursor rather than read on.
	searchScanBudget = 20000
)

// searchKey is a message's place in a search's order: newest sentAt first,
// then queue name, then sequence.
type searchKey struct {
	SentAt   int64  `json:"t"` // microseconds since the epoch (Postgres's precision)
	Queue    string `json:"q"`
	Sequence int64  `json:"s"`
}

func (k searchKey) compare(o searchKey) int {
	if c := cmp.Compare(o.SentAt, k.SentAt); c != 0 {
		return c
	}
	if c := cmp.Compare(k.Queue, o.Queue); c != 0 {
		return c
	}
	return cmp.Compare(k.Sequence, o.Sequence)
}

func keyOf(r db.MessageSearchWalkRow) searchKey {
	return searchKey{SentAt: r.SentAt.UnixMicro(), Queue: r.QueueName, Sequence: r.Sequence}
}

// SearchMessages lists the tenant's messages across queues, newest first,
// One page at a time (docs/API.md#search). A page may hold fewer than limit
// messages, even none, with a cursor: the walk stopped at its budget
// before reaching the end of some queue, and the next page goes on from
// there.
func (s *Service) SearchMessages(ctx context.Context, tenant string, o SearchOptions) ([]BrowsedMessage, string, error) {
	after, err := s.validateSearch(&o)
	if err != nil {
		return nil, "", err
	}
	queues, err := s.searchQueues(ctx, tenant, o)
	if err != nil || len(queues) == 0 {
		return nil, "", err
	}
	ids := make([]int64, len(queues))
	for i, q := range queues {
		ids[i] = q.ID
	}
	tags, err := json.Marshal(o.Tags)
	if err != nil {
		return nil, "", err
	}
	if o.Tags == nil {
		tags = []byte("{}")
	}
	p := db.MessageSearchWalkParams{
		Budget: searchScanBudget, MaxMatches: int64(o.Limit + 1),
		States: o.States, Tags: tags, SentAfter: o.SentAfter, SentBefore: o.SentBefore,
		QueueIds: ids, Now: s.now(),
	}
	if o.GroupID != "" {
		p.GroupID = &o.GroupID
	}
	if p.States == nil {
		p.States = []string{}
	}
	if after != nil {
		t := time.UnixMicro(after.SentAt)
		p.AfterSentAt, p.AfterQueue, p.AfterSequence = &t, after.Queue, after.Sequence
	}
	var walked []db.MessageSearchWalkRow
	if o.MessageID != "" {
		rows, err := s.q.MessageSearchByID(ctx, db.MessageSearchByIDParams{
			MessageID: o.MessageID, States: p.States, Tags: p.Tags, SentAfter: p.SentAfter,
			SentBefore: p.SentBefore, AfterSentAt: p.AfterSentAt, AfterQueue: p.AfterQueue,
			AfterSequence: p.AfterSequence, QueueIds: ids, Now: p.Now, GroupID: p.GroupID})
		if err != nil {
			return nil, "", fromDB("search", err)
		}
		for _, r := range rows {
			walked = append(walked, db.MessageSearchWalkRow(r))
		}
	} else if walked, err = s.q.MessageSearchWalk(ctx, p); err != nil {
		return nil, "", fromDB("search", err)
	}
	page, next := searchPage(walked, o.Limit, int64(s.limits.MaxResponseBytes))
	msgs, err := s.searchFetch(ctx, page)
	return msgs, next, err
}

// searchPage picks a page from what the walk returned: the matches in
// search order up to the first queue's walk end (past it that queue was
// not read), at most limit of them and within the response budget. next
// is the cursor after the page, "" when the search is complete.
func searchPage(walked []db.MessageSearchWalkRow, limit int, budget int64) (page []db.MessageSearchWalkRow, next string) {
	var horizon *searchKey
	var matches []db.MessageSearchWalkRow
	for _, r := range walked {
		if r.Exhausted {
			if k := keyOf(r); horizon == nil || k.compare(*horizon) < 0 {
				horizon = &k
			}
		}
		if r.Matched {
			matches = append(matches, r)
		}
	}
	slices.SortFunc(matches, func(a, b db.MessageSearchWalkRow) int { return keyOf(a).compare(keyOf(b)) })
	var size int64
	for _, r := range matches {
		if horizon != nil && keyOf(r).compare(*horizon) > 0 {
			break
		}
		if len(page) == limit || (len(page) > 0 && size >= budget) {
			return page, encodeSearchCursor(keyOf(page[len(page)-1]))
		}
		page = append(page, r)
		size += r.Size + MessageOverheadBytes
	}
	if horizon != nil {
		// The page ends at the horizon: go on after it, whether or not the
		// page holds it (or anything).
		return page, encodeSearchCursor(*horizon)
	}
	return page, ""
}

// searchFetch reads the page's rows whole, in the page's order. A message
// gone since the walk (acked, deleted) is left out.
func (s *Service) searchFetch(ctx context.Context, page []db.MessageSearchWalkRow) ([]BrowsedMessage, error) {
	if len(page) == 0 {
		return nil, nil
	}
	ids, seqs := make([]int64, len(page)), make([]int64, len(page))
	for i, r := range page {
		ids[i], seqs[i] = r.QueueID, r.Sequence
	}
	rows, err := s.q.MessageGetByKeys(ctx, db.MessageGetByKeysParams{QueueIds: ids, Sequences: seqs})
	if err != nil {
		return nil, fromDB("search", err)
	}
	if err := s.fillTopicBodies(ctx, pointers(rows)...); err != nil {
		return nil, err
	}
	bySeq := make(map[int64]db.SkipqMessage, len(rows))
	for _, r := range rows {
		bySeq[r.Sequence] = r
	}
	out := make([]BrowsedMessage, 0, len(page))
	for _, r := range page {
		if m, ok := bySeq[r.Sequence]; ok {
			out = append(out, browsed(r.QueueName, m, r.State))
		}
	}
	return out, nil
}

func (s *Service) validateSearch(o *SearchOptions) (*searchKey, error) {
	var is issues
	if len(o.Queues) > MaxSearchQueueNames {
		is.add("queue", "may be given at most %d times", MaxSearchQueueNames)
	}
	for _, q := range o.Queues {
		if msg := ValidQueueName(q); msg != "" {
			is.add("queue", "%q: %s", q, msg)
		}
	}
	is.text("queuePrefix", o.QueuePrefix)
	if o.MessageID != "" && !IsID(o.MessageID) {
		is.add("messageId", "must match ^[A-Za-z0-9._:-]{1,128}$")
	}
	if len(o.Queues) > 0 && o.QueuePrefix != "" {
		is.add("queuePrefix", "give queue or queuePrefix, not both")
	}
	for _, st := range o.States {
		switch st {
		case StateAvailable, StateDelayed, StateInFlight, StateDeadLettered, StateAcked:
		default:
			is.add("state", "must be available, delayed, in_flight, dead_lettered or acked, not %q", st)
		}
	}
	if o.GroupID != "" && !IsID(o.GroupID) {
		is.add("groupId", "must match ^[A-Za-z0-9._:-]{1,128}$")
	}
	if o.SentAfter != nil && o.SentBefore != nil && !o.SentAfter.Before(*o.SentBefore) {
		is.add("sentBefore", "must be later than sentAfter")
	}
	s.checkTags(&is, "tag", o.Tags)
	is.between("limit", &o.Limit, 1, maxListLimit)
	after, err := decodeSearchCursor(o.Cursor)
	if err != nil {
		is = append(is, err.(*Error).Issues...)
	}
	return after, is.err()
}

// searchQueues are the tenant's queues a search walks.
func (s *Service) searchQueues(ctx context.Context, tenant string, o SearchOptions) ([]db.SkipqQueue, error) {
	if len(o.Queues) > 0 {
		qs, err := s.q.QueueListByNames(ctx, db.QueueListByNamesParams{Tenant: tenant, Names: o.Queues})
		return qs, fromDB("search", err)
	}
	qs, err := s.q.QueueList(ctx, db.QueueListParams{Tenant: tenant, Prefix: o.QueuePrefix, MaxQueues: maxSearchQueues + 1})
	if err != nil {
		return nil, fromDB("search", err)
	}
	if len(qs) > maxSearchQueues {
		path := "queuePrefix"
		if o.QueuePrefix == "" {
			path = "queue"
		}
		return nil, Invalid(Issue{Path: path, Message: "the search would span more than 1000 queues; name them with queue or narrow them with queuePrefix"})
	}
	return qs, nil
}

func encodeSearchCursor(k searchKey) string {
	raw, _ := json.Marshal(k) // three plain fields always marshal
	return encodeCursor(string(raw))
}

func decodeSearchCursor(cursor string) (*searchKey, error) {
	if cursor == "" {
		return nil, nil
	}
	raw, err := decodeCursor(cursor)
	var k searchKey
	if err != nil || json.Unmarshal([]byte(raw), &k) != nil || k.Sequence <= 0 {
		return nil, Invalid(Issue{Path: "cursor", Message: "is not a cursor this server issued"})
	}
	return &k, checkTextKey("cursor", k.Queue)
}
