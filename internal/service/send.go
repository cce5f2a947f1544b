package service

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skipq/skipq/internal/db"
)

// MessageInput is one message to send. Nil policy fields take the queue's
// defaults.
type MessageInput struct {
	Body              string
	BodyEncoding      string // "text" (default) or "base64"
	Metadata          string
	Tags              map[string]string
	ClientID          string
	MessageID         string // "" = a server UUIDv7
	DelaySeconds      *int
	ExpirationSeconds *int
	MaxReceiveCount   *int    // 0 = the queue's default
	DeadLetterQueue   *string // "" = discard
	GroupID           string  // required on a FIFO queue, refused on a standard one
	// SQS is stored under SQSTagKey beside Tags (nil = none).
	SQS *SQSData
	// SQSDedupID is an SQS MessageDeduplicationId: a key of its own space,
	// whose resend with other content is a duplicate, not a conflict.
	SQSDedupID string
}

// SendResult is the outcome of one sent message.
type SendResult struct {
	MessageID string
	Sequence  int64
	SentAt    time.Time
	DelayedTo *time.Time
	ExpiresAt *time.Time
	Duplicate bool
}

// prepared is a validated message ready for the insert.
type prepared struct {
	MessageInput
	body        []byte
	binary      bool
	tagsJSON    string
	clientGiven bool
	keyID       *int64 // the API key that sends it, for its history
}

// Send sends one message (the single-message route), creating its queue
// if missing.
func (s *Service) Send(ctx context.Context, tenant, queue string, in MessageInput) (SendResult, error) {
	return s.sendOne(ctx, tenant, queue, in, createMissing)
}

func (s *Service) sendOne(ctx context.Context, tenant, queue string, in MessageInput, missing missingQueue) (SendResult, error) {
	res, err := s.send(ctx, tenant, queue, []MessageInput{in}, func(int) string { return "" }, missing)
	if err != nil {
		return SendResult{}, err
	}
	return res[0], nil
}

// MaxBatchGroups bounds the distinct groups of one batch: a send waits for
// each group's lock (skipq.group_enter), and a transaction's locks must fit
// PostgreSQL's shared lock table (max_locks_per_transaction per connection).
const MaxBatchGroups = 64

// SendBatch sends up to MaxBatchMessages messages in one transaction: all or
// nothing, creating the queue if missing (and only if something is sent).
// Results are in input order.
func (s *Service) SendBatch(ctx context.Context, tenant, queue string, in []MessageInput) ([]SendResult, error) {
	return s.sendBatch(ctx, tenant, queue, in, createMissing)
}

func (s *Service) sendBatch(ctx context.Context, tenant, queue string, in []MessageInput, missing missingQueue) ([]SendResult, error) {
	if err := checkBatch(in); err != nil {
		return nil, err
	}
	return s.send(ctx, tenant, queue, in, func(i int) string { return fmt.Sprintf("messages[%d]", i) }, missing)
}

// missingQueue is what a send does when its queue does not exist.
type missingQueue bool

const (
	// createMissing creates it with the defaults (a native send).
	createMissing missingQueue = true
	// refuseMissing answers KindNotFound: an SQS send never creates a
	// queue, and must not bring back one that was just deleted.
	refuseMissing missingQueue = false
)

// checkBatch holds a batch to the limits of the request as a whole.
func checkBatch(in []MessageInput) error {
	switch {
	case len(in) == 0:
		return Invalid(Issue{Path: "messages", Message: "must hold at least one message"})
	case len(in) > MaxBatchMessages:
		return Invalid(Issue{Path: "messages", Message: fmt.Sprintf("must hold at most %d messages", MaxBatchMessages)})
	}
	groups := map[string]bool{}
	for _, m := range in {
		if m.GroupID != "" {
			groups[m.GroupID] = true
		}
	}
	if len(groups) > MaxBatchGroups {
		return Invalid(Issue{Path: "messages", Message: fmt.Sprintf("must name at most %d distinct groupIds", MaxBatchGroups)})
	}
	return nil
}

func (s *Service) send(ctx context.Context, tenant, queue string, in []MessageInput, pathOf func(int) string, missing missingQueue) ([]SendResult, error) {
	if err := checkQueueName("queue", queue); err != nil {
		return nil, err
	}
	msgs, err := s.prepare(queue, in, pathOf)
	if err != nil {
		return nil, err
	}
	call, err := s.store(ctx, tenant, queue, msgs, pathOf, missing)
	if err != nil {
		return nil, err
	}
	if call.err != nil {
		return nil, call.err
	}
	return call.results, nil
}

// store sends prepared messages through the shared statement and, when
// they were stored, tells the receivers, the names cache and the metrics.
// The error is the sharer's (the request's context ended); the send's own
// verdict is in the call.
func (s *Service) store(ctx context.Context, tenant, queue string, msgs []prepared, pathOf func(int) string, missing missingQueue) (*sendCall, error) {
	for i := range msgs {
		msgs[i].keyID = keyIDOf(ctx)
	}
	call := &sendCall{tenant: tenant, queue: queue, msgs: msgs, pathOf: pathOf, missing: missing}
	if err := s.sends.do(ctx, call); err != nil {
		return nil, fromDB("send", err)
	}
	if call.err != nil {
		return call, nil
	}
	sent, fresh := 0, 0
	for _, r := range call.results {
		if !r.Duplicate {
			sent++
			if r.DelayedTo == nil {
				fresh++
			}
		}
	}
	s.hub.Publish(call.queueID, fresh)
	s.names.remember(call.queueID, tenant, queue)
	s.obs.MessagesSent(tenant, queue, sent)
	return call, nil
}

// sendAttempts bounds how often a send retries when its queue vanished
// between finding it missing and inserting into it (a DELETE of the queue
// racing the send). Each retry re-creates the queue, so only a client
// deleting the same queue in a tight loop can exhaust it.
const sendAttempts = 5

// errQueueVanished is a send's insert finding no queue after creating it.
var errQueueVanished = &Error{Kind: KindUnavailable, Message: "the queue was deleted while the send ran; retry"}

// sendCall is one request's part of a send. Concurrent sends on this node
// share their statement (sharer): one skipq.message_insert and one commit
// per queue for all of them, idempotency keys included.
type sendCall struct {
	tenant, queue string
	msgs          []prepared
	pathOf        func(int) string
	missing       missingQueue
	results       []SendResult
	queueID       int64
	err           error
	// refused are the positions the database turned down (a key
	// conflict, a group rule), in position order; nothing was stored.
	// err sums them up for an all-or-nothing send.
	refused []refusal
}

// refusal is one message the database refused, by its position in a send.
type refusal struct {
	pos int
	err *Error
}

// sendSize weighs a send by its bytes, so that a shared statement stays
// within sharedSendBytes however small its requests' messages are: its
// parameters are built in memory, a copy of every body.
func sendSize(c *sendCall) int {
	n := 0
	for _, m := range c.msgs {
		n += len(m.body) + len(m.Metadata) + len(m.tagsJSON) + sendOverheadBytes
	}
	return n
}

const (
	// sharedSendBytes bounds one shared INSERT's messages: the default
	// request limit, SKIPQ_MAX_REQUEST_BYTES. A larger request runs alone.
	sharedSendBytes = 16 << 20
	// sendOverheadBytes is a message's ids, flags and policies in the
	// statement's parameters, roughly.
	sendOverheadBytes = 256
)

// runSends sends the messages of several requests, one statement per
// queue (runBatches). A statement that cannot answer every request on its
// own -- the server refused it (nothing was stored), the queue is missing,
// or a key conflicts (nothing was stored either) -- is short of rows, and
// each of its requests is sent on its own (sendAlone), which creates the
// queue or gets its own verdict, in arrival order.
func (s *Service) runSends(ctx context.Context, st statements, calls []*sendCall) (blocked []*sendCall) {
	return runBatches(st, calls, "send",
		func(t batchTarget, msgs []prepared) ([]db.MessageInsertRow, error) {
			return st.q.MessageInsert(ctx, s.insertParams(t.tenant, t.name, msgs))
		},
		func(rows []db.MessageInsertRow, n int) bool { return len(rows) == n },
		func(c *sendCall) bool { return s.sendAlone(ctx, st, c) })
}

// batchTarget is what one shared statement writes to: a tenant's queue
// (sends) or topic (publishes).
type batchTarget struct{ tenant, name string }

// batchCall is one request's part of a shared send or publish, whose
// statement answers rows of type R.
type batchCall[R any] interface {
	target() batchTarget
	messages() []prepared
	// answer takes the request's results from the rows of the statement
	// that carried it, where its messages were positions off+1 onwards.
	answer(rows []R, off int)
	fail(err error)
}

// runBatches runs the requests of a sharer's round (sends or publishes,
// op names them in errors), one statement per target, the requests'
// messages one after another: a request's positions are a range of the
// statement's. run is that statement. When its rows do not answer every
// message (whole says), each request runs on its own (alone), in arrival
// order. When the connection failed, whether it committed is unknown, and
// each request answers the error. The requests of a statement that ran
// out of its lock timeout are returned unanswered (blocked), to run on
// their own (sharer); alone reports the same of its request.
func runBatches[C batchCall[R], R any](st statements, calls []C, op string,
	run func(t batchTarget, msgs []prepared) ([]R, error), whole func(rows []R, n int) bool,
	alone func(C) (blocked bool)) (blocked []C) {
	byTarget := map[batchTarget][]C{}
	var order []batchTarget
	for _, c := range calls {
		t := c.target()
		if byTarget[t] == nil {
			order = append(order, t)
		}
		byTarget[t] = append(byTarget[t], c)
	}
	for _, t := range order {
		group := byTarget[t]
		if len(group) == 1 {
			if alone(group[0]) {
				blocked = append(blocked, group[0])
			}
			continue
		}
		n := 0
		for _, c := range group {
			n += len(c.messages())
		}
		// Sized first: appended as they came, the list of a statement
		// shared by a few requests of 100 grew several times over, and
		// its discarded copies cost as much again as the list.
		all := make([]prepared, 0, n)
		for _, c := range group {
			all = append(all, c.messages()...)
		}
		rows, err := run(t, all)
		if st.outsideLock(err) {
			// Some request waits on another transaction (a held group or
			// key); the statement stored nothing. Which one is unknown:
			// each goes on its own, and only that one waits.
			blocked = append(blocked, group...)
			continue
		}
		var refused *pgconn.PgError
		if err != nil && !errors.As(err, &refused) {
			// The connection failed: the shared statement may have
			// committed before its answer was lost. Running each again
			// could store their messages twice, so each request gets the
			// error (503), as a statement of its own would have.
			for _, c := range group {
				c.fail(fromDB(op, err))
			}
			continue
		}
		if err != nil || !whole(rows, len(all)) {
			for _, c := range group {
				if alone(c) {
					blocked = append(blocked, c)
				}
			}
			continue
		}
		off := 0
		for _, c := range group {
			c.answer(rows, off)
			off += len(c.messages())
		}
	}
	return blocked
}

func (c *sendCall) target() batchTarget  { return batchTarget{c.tenant, c.queue} }
func (c *sendCall) messages() []prepared { return c.msgs }
func (c *sendCall) fail(err error)       { c.err = err }

// answer gives a send its results from the rows of the statement that
// carried it, where its messages were positions off+1 to off+len(msgs),
// or, when the database refused some of them, the refusals.
func (c *sendCall) answer(rows []db.MessageInsertRow, off int) {
	c.results = make([]SendResult, len(c.msgs))
	c.refused = nil
	for _, r := range rows {
		i := int(r.Pos) - 1 - off
		if i < 0 || i >= len(c.msgs) {
			continue
		}
		c.queueID = r.QueueID
		switch r.Outcome {
		case db.OutcomeConflict:
			c.refused = append(c.refused, refusal{i, conflict(c.pathOf(i), c.msgs[i].MessageID)})
		case db.OutcomeGroupRequired:
			c.refused = append(c.refused, refusal{i, Invalid(Issue{Path: join(c.pathOf(i), "groupId"), Message: "is required: the queue is FIFO"})})
		case db.OutcomeGroupRefused:
			c.refused = append(c.refused, refusal{i, Invalid(Issue{Path: join(c.pathOf(i), "groupId"), Message: "is not allowed: the queue is not FIFO"})})
		default:
			c.results[i] = SendResult{MessageID: r.MessageID, Sequence: deref(r.Sequence), SentAt: deref(r.SentAt),
				DelayedTo: r.DelayedTo, ExpiresAt: r.ExpiresAt, Duplicate: r.Outcome == db.OutcomeDuplicate}
		}
	}
	if len(c.refused) == 0 {
		return
	}
	slices.SortFunc(c.refused, func(a, b refusal) int { return a.pos - b.pos })
	c.results = nil
	// The statement refuses either for groups or for keys, never both: all
	// the group issues together, or the first conflict.
	if first := c.refused[0].err; first.Kind == KindInvalid {
		var groupIssues []Issue
		for _, r := range c.refused {
			groupIssues = append(groupIssues, r.err.Issues...)
		}
		slices.SortFunc(groupIssues, func(a, b Issue) int { return strings.Compare(a.Path, b.Path) })
		c.err = Invalid(groupIssues...)
	} else {
		c.err = first
	}
}

// sendAlone is one request's send, creating its queue if needed (and if
// the call may). It reports whether the statement ran out of st's lock
// timeout, unanswered.
func (s *Service) sendAlone(ctx context.Context, st statements, c *sendCall) (blocked bool) {
	params := s.insertParams(c.tenant, c.queue, c.msgs)
	rows, err := st.q.MessageInsert(ctx, params)
	for attempt := 1; err == nil && len(rows) == 0; attempt++ {
		if c.missing == refuseMissing {
			c.err = notFound("queue %q does not exist", c.queue)
			return false
		}
		if attempt == sendAttempts {
			c.err = errQueueVanished
			return false
		}
		rows, err = s.createAndInsert(ctx, st, c, params)
	}
	switch {
	case st.outsideLock(err):
		return true
	case db.IsUniqueViolation(err, "messages_message_id_queue_key"):
		// The id is held by a message moved into this queue (requeue or
		// dead-letter), which has no idempotency key of its own.
		c.err = heldConflict("", err)
	case err != nil:
		c.err = fromDB("send", err)
	case (rows[0].Outcome == db.OutcomeSent || rows[0].Outcome == db.OutcomeDuplicate) && len(rows) != len(c.msgs):
		c.err = fromDB("send", fmt.Errorf("answered %d of %d messages", len(rows), len(c.msgs)))
	default:
		c.answer(rows, 0)
	}
	return false
}

// errSendRefused rolls back the transaction of createAndInsert when the
// database refused the send.
var errSendRefused = errors.New("the send was refused")

// createAndInsert creates a send's missing queue and inserts into it in one
// transaction, which it rolls back when the insert stored nothing (a key
// conflict, a group rule): a send that fails creates no queue. No rows
// means the queue vanished again (deleted by someone else meanwhile).
func (s *Service) createAndInsert(ctx context.Context, st statements, c *sendCall, params db.MessageInsertParams) ([]db.MessageInsertRow, error) {
	var rows []db.MessageInsertRow
	err := db.RetryPooled(func() error {
		return pgx.BeginTxFunc(ctx, s.pool, st.tx, func(tx pgx.Tx) error {
			q := st.q.WithTx(tx)
			// A queue created by a send with groups is FIFO.
			fifo := slices.ContainsFunc(c.msgs, func(m prepared) bool { return m.GroupID != "" })
			if err := q.QueueCreateMissing(ctx, db.QueueCreateMissingParams{Tenant: c.tenant, Names: []string{c.queue}, Fifo: fifo}); err != nil {
				return err
			}
			var err error
			if rows, err = q.MessageInsert(ctx, params); err != nil {
				return err
			}
			if slices.ContainsFunc(rows, func(r db.MessageInsertRow) bool {
				return r.Outcome != db.OutcomeSent && r.Outcome != db.OutcomeDuplicate
			}) {
				return errSendRefused
			}
			return nil
		})
	})
	if errors.Is(err, errSendRefused) {
		return rows, nil
	}
	return rows, err
}

// heldConflict is a send of a messageId that a message moved into the queue
// holds; path is the message's, "" when the request does not say which.
func heldConflict(path string, err error) *Error {
	e := &Error{Kind: KindIdempotencyConflict, Message: "a message with this messageId is already in the queue", Err: err}
	if path != "" {
		e.Issues = []Issue{{Path: path, Message: "is held by a message moved into the queue"}}
	}
	return e
}

func conflict(path, id string) *Error {
	return &Error{Kind: KindIdempotencyConflict,
		Message: fmt.Sprintf("messageId %q was already sent with different content", id),
		Issues:  []Issue{{Path: join(path, "messageId"), Message: "already used with different content"}}}
}

func (s *Service) insertParams(tenant, queue string, msgs []prepared) db.MessageInsertParams {
	// Every array made at its size: grown by append from nothing, they were
	// twice the allocations and bytes (BenchmarkInsertParams).
	n := len(msgs)
	p := db.MessageInsertParams{
		Now:                   s.now(),
		Tenant:                tenant,
		Queue:                 queue,
		ServerMaxReceiveCount: int32(s.limits.MaxReceiveCount),
		MessageIds:            make([]string, 0, n),
		Keyed:                 make([]bool, 0, n),
		ClientIds:             make([]string, 0, n),
		Metadatas:             make([]string, 0, n),
		BodyOffsets:           make([]int32, 0, n),
		BodyLengths:           make([]int32, 0, n),
		BodyBinaries:          make([]bool, 0, n),
		Tags:                  make([]string, 0, n),
		DelaySeconds:          make([]int32, 0, n),
		ExpirationSeconds:     make([]int32, 0, n),
		MaxReceiveCounts:      make([]int32, 0, n),
		DeadLetterQueues:      make([]string, 0, n),
		DeadLetterQueueGiven:  make([]bool, 0, n),
	}
	// The bodies go as one bytea cut by offsets (skipq.message_insert): one
	// exact copy here instead of the driver growing a bytea[] parameter
	// element by element.
	size := 0
	for _, m := range msgs {
		size += len(m.body)
	}
	p.BodyData = make([]byte, 0, size)
	for _, m := range msgs {
		p.MessageIds = append(p.MessageIds, m.MessageID)
		p.Keyed = append(p.Keyed, m.clientGiven)
		p.ClientIds = append(p.ClientIds, m.ClientID)
		p.Metadatas = append(p.Metadatas, m.Metadata)
		p.BodyOffsets = append(p.BodyOffsets, int32(len(p.BodyData)+1))
		p.BodyLengths = append(p.BodyLengths, int32(len(m.body)))
		p.BodyData = append(p.BodyData, m.body...)
		p.BodyBinaries = append(p.BodyBinaries, m.binary)
		p.Tags = append(p.Tags, m.tagsJSON)
		p.DelaySeconds = append(p.DelaySeconds, intOr(m.DelaySeconds, -1))
		p.ExpirationSeconds = append(p.ExpirationSeconds, intOr(m.ExpirationSeconds, -1))
		p.MaxReceiveCounts = append(p.MaxReceiveCounts, intOr(m.MaxReceiveCount, 0))
		p.DeadLetterQueues = append(p.DeadLetterQueues, strOr(m.DeadLetterQueue, ""))
		p.DeadLetterQueueGiven = append(p.DeadLetterQueueGiven, m.DeadLetterQueue != nil)
	}
	// Group ids only when some message has one: a standard queue's send
	// passes NULL.
	for i, m := range msgs {
		if m.GroupID == "" {
			continue
		}
		if p.GroupIds == nil {
			p.GroupIds = make([]*string, len(msgs))
		}
		p.GroupIds[i] = &msgs[i].GroupID
	}
	for i, m := range msgs {
		if m.keyID == nil {
			continue
		}
		if p.KeyIds == nil {
			p.KeyIds = make([]int64, len(msgs))
		}
		p.KeyIds[i] = *m.keyID
	}
	for i, m := range msgs {
		if m.SQSDedupID == "" {
			continue
		}
		if p.DedupIds == nil {
			p.DedupIds = make([]*string, len(msgs))
		}
		p.DedupIds[i] = &msgs[i].SQSDedupID
	}
	return p
}

// prepare validates every message and decodes its body. Oversized messages
// are reported as KindTooLarge (413), everything else as KindInvalid.
func (s *Service) prepare(queue string, in []MessageInput, pathOf func(int) string) ([]prepared, error) {
	var is issues
	var tooLarge issues
	out := make([]prepared, len(in))
	for i, m := range in {
		// A message's issues are found at paths relative to it and put
		// under pathOf(i) only when there are some: building the paths
		// of every valid message's nine checks cost more than the checks.
		firstIssue, firstTooLarge := len(is), len(tooLarge)
		out[i] = prepared{MessageInput: m}
		o := &out[i]
		switch m.BodyEncoding {
		case "", "text":
			// The bytes of the string itself, not a copy: a batch's bodies
			// are most of its memory, and nothing writes to o.body (the
			// hash and the driver only read it). An empty string may have
			// no data pointer, and a nil []byte is NULL to the driver.
			o.body = []byte{}
			if m.Body != "" {
				o.body = unsafe.Slice(unsafe.StringData(m.Body), len(m.Body))
			}
		case "base64":
			b, err := base64.StdEncoding.DecodeString(m.Body)
			if err != nil {
				is.add("body", "is not valid base64 (RFC 4648, standard alphabet, with padding)")
			}
			o.body, o.binary = b, true
		default:
			is.add("bodyEncoding", `must be "text" or "base64"`)
		}
		if len(o.body) == 0 && m.Metadata == "" {
			is.add("body", "body or metadata must be non-empty")
		}
		if len(o.body)+len(m.Metadata) > s.limits.MaxMessageBytes {
			tooLarge.add("body", "body and metadata together exceed %d bytes", s.limits.MaxMessageBytes)
		}
		if m.MessageID != "" {
			if !IsID(m.MessageID) {
				is.add("messageId", "must match ^[A-Za-z0-9._:-]{1,128}$")
			}
			o.clientGiven = true
		} else {
			id, err := uuid.NewV7()
			if err != nil {
				return nil, &Error{Kind: KindInternal, Message: "minting a message id failed", Err: err}
			}
			o.MessageID = id.String()
		}
		if m.GroupID != "" && !IsID(m.GroupID) {
			is.add("groupId", "must match ^[A-Za-z0-9._:-]{1,128}$")
		}
		if len(m.ClientID) > 256 {
			is.add("clientId", "must be at most 256 bytes")
		}
		s.checkTags(&is, "tags", m.Tags)
		l := s.limits
		is.between("delaySeconds", m.DelaySeconds, 0, l.MaxDelaySeconds)
		is.between("expirationSeconds", m.ExpirationSeconds, 0, l.MaxExpirationSeconds)
		is.between("maxReceiveCount", m.MaxReceiveCount, 0, l.MaxReceiveCount)
		checkDeadLetterQueue(&is, "deadLetterQueue", queue, m.DeadLetterQueue)
		is.text("metadata", m.Metadata)
		is.text("clientId", m.ClientID)
		if len(is) > firstIssue || len(tooLarge) > firstTooLarge {
			under(pathOf(i), is[firstIssue:])
			under(pathOf(i), tooLarge[firstTooLarge:])
		}
		o.tagsJSON = tagsJSON(m)
	}
	if err := is.err(); err != nil {
		return nil, err
	}
	if len(tooLarge) > 0 {
		e := Invalid(tooLarge...)
		e.Kind = KindTooLarge
		return nil, e
	}
	return out, nil
}

func (s *Service) checkTags(is *issues, path string, tags map[string]string) {
	if len(tags) > maxTags {
		is.add(path, "must hold at most %d tags", maxTags)
	}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	slices.Sort(keys) // deterministic issue order
	for _, k := range keys {
		switch {
		case !IsTagKey(k):
			is.add(path+"."+k, "tag keys must match ^[A-Za-z0-9_.-]{1,64}$")
		case strings.HasPrefix(k, ReservedTagPrefix):
			is.add(path+"."+k, `tag keys must not start with "`+ReservedTagPrefix+`"`)
		case len(tags[k]) > maxTagValueBytes:
			is.add(path+"."+k, "tag values must be at most %d bytes", maxTagValueBytes)
		default:
			is.text(path+"."+k, tags[k])
		}
	}
}

// under puts issues found at paths relative to a message under the
// message's path.
func under(path string, issues []Issue) {
	for i := range issues {
		issues[i].Path = join(path, issues[i].Path)
	}
}

// noTags is the tags column of a message without tags, as json.Marshal
// writes an empty map.
const noTags = "{}"

// tagsJSON is m's tags as the JSON object the tags column stores, with
// the SQS attributes under SQSTagKey.
func tagsJSON(m MessageInput) string {
	if len(m.Tags) == 0 && m.SQS == nil {
		return noTags // most messages: no map to marshal
	}
	all := nonNilTags(m.Tags)
	if m.SQS != nil {
		doc, _ := json.Marshal(m.SQS)
		all = maps.Clone(all)
		all[SQSTagKey] = string(doc)
	}
	tags, _ := json.Marshal(all)
	return string(tags)
}

func nonNilTags(t map[string]string) map[string]string {
	if t == nil {
		return map[string]string{}
	}
	return t
}

func intOr(v *int, def int) int32 {
	if v == nil {
		return int32(def)
	}
	return int32(*v)
}

func strOr(v *string, def string) string {
	if v == nil {
		return def
	}
	return *v
}

func deref[T any](v *T) T {
	var zero T
	if v == nil {
		return zero
	}
	return *v
}
