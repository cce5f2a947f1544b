package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skipq/skipq/internal/db"
)

// Topics (docs/DESIGN.md, "Topics"): a publish reaches every queue
// subscribed to the topic (each a consumer group) in one transaction. A
// group's copy is an ordinary message of its queue whose body is stored
// once for all groups; topicBodyTagKey names it, TopicTagKey the topic.
const (
	TopicTagKey     = "skipq.topic"
	topicBodyTagKey = "skipq.body"
)

// MaxTopicSubscriptions bounds a topic's subscriptions: a publish writes
// one copy per matching group in its transaction.
const MaxTopicSubscriptions = 100

// Topic is a topic's settings and what it has seen.
type Topic struct {
	Name               string
	FIFO               bool
	DedupWindowSeconds int
	RetainSeconds      int
	Subscriptions      int
	Published          int64
	Delivered          int64
	Unrouted           int64
	CreatedAt          time.Time
	UpdatedAt          time.Time
	// SubscriptionList is filled by GetTopic only.
	SubscriptionList []Subscription
}

// Subscription binds a topic to a queue, its consumer group.
type Subscription struct {
	Queue     string
	Filter    *TopicFilter
	CreatedAt time.Time
	// ReplayFrom is set while the subscription replays the topic's
	// retained messages published since then.
	ReplayFrom *time.Time
}

// TopicFilter selects the messages a subscription receives: for every tag
// key it names, the message's tag is one of the listed values.
type TopicFilter struct {
	Tags map[string][]string `json:"tags,omitempty"`
}

// TopicSettings are a PUT of a topic; nil keeps the current value (or the
// default, on creation).
type TopicSettings struct {
	FIFO               *bool
	DedupWindowSeconds *int
	RetainSeconds      *int
}

// PublishResult is the outcome of one published message.
type PublishResult struct {
	MessageID   string
	DeliveredTo int
	PublishedAt time.Time
	Duplicate   bool
}

// TopicMessageGroup is one group's state of a published message.
type TopicMessageGroup struct {
	Queue          string
	State          string
	ReceiveCount   int
	LeaseExpiresAt *time.Time
	// Consumed: acked (retained or gone) or dead-lettered in this group.
	Consumed bool
}

// StateGone is a published message no longer in a group's queue (acked
// without retention, expired, deleted, or never delivered there).
const StateGone = "gone"

// ErrTopicKindChange is a PUT that would change a topic's fifo.
var ErrTopicKindChange = &Error{Kind: KindConflict, Message: "fifo is fixed when the topic is created"}

func topicNotFound(name string) *Error { return notFound("topic %q does not exist", name) }

// PutTopic creates a topic or changes its settings; created says which.
func (s *Service) PutTopic(ctx context.Context, tenant, name string, in TopicSettings) (Topic, bool, error) {
	var is issues
	if msg := ValidQueueName(name); msg != "" {
		is.add("topic", "%s", msg)
	}
	is.between("dedupWindowSeconds", in.DedupWindowSeconds, 0, maxDedupWindow)
	is.between("retainSeconds", in.RetainSeconds, 0, s.limits.MaxExpirationSeconds)
	if err := is.err(); err != nil {
		return Topic{}, false, err
	}
	var created bool
	err := s.inTx(ctx, func(q *db.Queries) error {
		_, err := q.TopicCreate(ctx, db.TopicCreateParams{Tenant: tenant, Name: name,
			Fifo: in.FIFO != nil && *in.FIFO, DedupWindowSeconds: intOr(in.DedupWindowSeconds, 300),
			RetainSeconds: intOr(in.RetainSeconds, 0)})
		if err == nil {
			created = true
			return nil
		}
		if !errors.Is(db.NotFound(err), db.ErrNotFound) {
			return err
		}
		fifo, err := q.TopicUpdate(ctx, db.TopicUpdateParams{Tenant: tenant, Name: name,
			DedupWindowSeconds: int32Ptr(in.DedupWindowSeconds), RetainSeconds: int32Ptr(in.RetainSeconds)})
		if err != nil {
			return err
		}
		if in.FIFO != nil && *in.FIFO != fifo {
			return ErrTopicKindChange
		}
		return nil
	})
	if err != nil {
		return Topic{}, false, fromDB("put topic", err)
	}
	t, err := s.GetTopic(ctx, tenant, name)
	return t, created, err
}

// GetTopic returns a topic with its subscriptions and counters.
func (s *Service) GetTopic(ctx context.Context, tenant, name string) (Topic, error) {
	if err := checkQueueName("topic", name); err != nil {
		return Topic{}, err
	}
	row, err := s.q.TopicGet(ctx, db.TopicGetParams{Tenant: tenant, Name: name})
	if err != nil {
		if errors.Is(db.NotFound(err), db.ErrNotFound) {
			return Topic{}, topicNotFound(name)
		}
		return Topic{}, fromDB("get topic", err)
	}
	t := topicFromRow(db.TopicListRow(row))
	subs, err := s.q.TopicSubscriptionList(ctx, row.ID)
	if err != nil {
		return Topic{}, fromDB("get topic", err)
	}
	t.SubscriptionList = make([]Subscription, len(subs))
	for i, r := range subs {
		t.SubscriptionList[i] = Subscription{Queue: r.Queue, CreatedAt: r.CreatedAt, ReplayFrom: r.ReplayFrom}
		if r.Filter != nil {
			var f TopicFilter
			if json.Unmarshal(r.Filter, &f) == nil { // written by Subscribe
				t.SubscriptionList[i].Filter = &f
			}
		}
	}
	return t, nil
}

func topicFromRow(r db.TopicListRow) Topic {
	return Topic{Name: r.Name, FIFO: r.Fifo, DedupWindowSeconds: int(r.DedupWindowSeconds),
		RetainSeconds: int(r.RetainSeconds), Subscriptions: int(r.Subscriptions), Published: r.Published,
		Delivered: r.Delivered, Unrouted: r.Unrouted, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

// ListTopics lists a tenant's topics by name, after the cursor.
func (s *Service) ListTopics(ctx context.Context, tenant string, limit int, cursor string) ([]Topic, string, error) {
	after, err := queueNamePage(limit, "", cursor)
	if err != nil {
		return nil, "", err
	}
	rows, err := s.q.TopicList(ctx, db.TopicListParams{Tenant: tenant, After: after, MaxTopics: int32(limit + 1)})
	if err != nil {
		return nil, "", fromDB("list topics", err)
	}
	next := ""
	if len(rows) > limit {
		rows = rows[:limit]
		next = encodeCursor(rows[limit-1].Name)
	}
	out := make([]Topic, len(rows))
	for i, r := range rows {
		out[i] = topicFromRow(r)
	}
	return out, next, nil
}

// DeleteTopic drops a topic and its subscriptions; the queues and their
// messages stay.
func (s *Service) DeleteTopic(ctx context.Context, tenant, name string) error {
	return s.unsubscribe(ctx, tenant, name, nil)
}

// Unsubscribe ends a queue's subscription; the queue and its messages stay.
func (s *Service) Unsubscribe(ctx context.Context, tenant, topic, queue string) error {
	if err := checkQueueName("queue", queue); err != nil {
		return err
	}
	return s.unsubscribe(ctx, tenant, topic, &queue)
}

func (s *Service) unsubscribe(ctx context.Context, tenant, topic string, queue *string) error {
	if err := checkQueueName("topic", topic); err != nil {
		return err
	}
	found, err := s.q.TopicUnsubscribe(ctx, db.TopicUnsubscribeParams{Tenant: tenant, Topic: topic, Queue: queue})
	switch {
	case err != nil:
		return fromDB("unsubscribe", err)
	case !found && queue == nil:
		return topicNotFound(topic)
	case !found:
		return notFound("queue %q is not subscribed to topic %q", *queue, topic)
	}
	return nil
}

// Subscribe subscribes a queue to a topic, creating the queue (of the
// topic's kind, with the defaults) if missing, or changes its filter;
// created says which. The group starts at the subscription's commit, or,
// for a new subscription given replayFrom, with the topic's retained
// messages published since then (the worker's ReplayTopics copies them;
// publishes reach the group once it caught up).
func (s *Service) Subscribe(ctx context.Context, tenant, topic, queue string, filter *TopicFilter, replayFrom *time.Time) (bool, error) {
	var is issues
	if msg := ValidQueueName(topic); msg != "" {
		is.add("topic", "%s", msg)
	}
	if msg := ValidQueueName(queue); msg != "" {
		is.add("queue", "%s", msg)
	}
	var doc []byte
	if filter != nil {
		for k, vs := range filter.Tags {
			if !IsTagKey(k) {
				is.add("filter.tags."+k, "tag keys must match ^[A-Za-z0-9_.-]{1,64}$")
			}
			if len(vs) == 0 {
				is.add("filter.tags."+k, "must list at least one value")
			}
			for _, v := range vs {
				is.text("filter.tags."+k, v)
			}
		}
		doc, _ = json.Marshal(filter)
	}
	if err := is.err(); err != nil {
		return false, err
	}
	outcome, err := s.q.TopicSubscribe(ctx, db.TopicSubscribeParams{Tenant: tenant, Topic: topic, Queue: queue,
		Filter: doc, MaxSubscriptions: MaxTopicSubscriptions, ReplayFrom: replayFrom})
	if err != nil {
		return false, fromDB("subscribe", err)
	}
	switch outcome {
	case "created":
		return true, nil
	case "updated":
		return false, nil
	case "topic_missing":
		return false, topicNotFound(topic)
	case "retains_nothing":
		return false, Invalid(Issue{Path: "replayFrom",
			Message: "the topic retains no messages (retainSeconds is 0): there is nothing to replay"})
	case "kind_mismatch":
		return false, Invalid(Issue{Path: "queue",
			Message: "a FIFO topic's subscriptions must be FIFO queues, a standard topic's standard queues"})
	case "too_many":
		return false, Invalid(Issue{Path: "queue",
			Message: fmt.Sprintf("a topic has at most %d subscriptions", MaxTopicSubscriptions)})
	}
	return false, &Error{Kind: KindInternal, Message: "subscribe: unknown outcome " + outcome}
}

// publishAttempts bounds how often a publish runs again when a subscribed
// queue was deleted and re-created while it ran (SQLSTATE 40001 from
// skipq.topic_publish).
const publishAttempts = 5

// publishCall is one request's part of a publish. Concurrent publishes to
// one topic on this node share their statement (sharer), as sends to one
// queue do: one skipq.topic_publish and one commit for all of them.
type publishCall struct {
	tenant, topic string
	msgs          []prepared
	pathOf        func(int) string
	results       []PublishResult
	// woken are the queues where the call's copies are available now.
	woken []int64
	err   error
}

func publishSize(c *publishCall) int {
	n := 0
	for _, m := range c.msgs {
		n += len(m.body) + len(m.Metadata) + len(m.tagsJSON) + sendOverheadBytes
	}
	return n
}

// Publish publishes messages to a topic in one transaction: every
// matching group gets each of them, or none does. Results are in input
// order.
func (s *Service) Publish(ctx context.Context, tenant, topic string, in []MessageInput, pathOf func(int) string) ([]PublishResult, error) {
	if err := checkQueueName("topic", topic); err != nil {
		return nil, err
	}
	if err := checkBatch(in); err != nil {
		return nil, err
	}
	// A topic has no dead-letter queue of its own to compare with.
	msgs, err := s.prepare("", in, pathOf)
	if err != nil {
		return nil, err
	}
	for i := range msgs {
		msgs[i].keyID = keyIDOf(ctx)
	}
	call := &publishCall{tenant: tenant, topic: topic, msgs: msgs, pathOf: pathOf}
	if err := s.publishes.do(ctx, call); err != nil {
		return nil, fromDB("publish", err)
	}
	if call.err != nil {
		return nil, call.err
	}
	published, delivered, unrouted := 0, 0, 0
	for _, r := range call.results {
		if r.Duplicate {
			continue
		}
		published++
		delivered += r.DeliveredTo
		if r.DeliveredTo == 0 {
			unrouted++
		}
	}
	// The receives it wakes claim in one shared statement (sharer.expect).
	s.hub.PublishEach(call.woken, s.claims.expect)
	s.obs.TopicPublished(tenant, topic, published, delivered, unrouted)
	return call.results, nil
}

// runPublishes publishes the messages of several requests, one statement
// per topic (runBatches). A statement that cannot answer every request on
// its own (the topic is missing, a key conflicts, a group rule, a refusal
// by the server: nothing was stored) is short of rows or answers another
// outcome than sent or duplicate, and each of its requests is published on
// its own (publishAlone).
func (s *Service) runPublishes(ctx context.Context, st statements, calls []*publishCall) (blocked []*publishCall) {
	return runBatches(st, calls, "publish",
		func(t batchTarget, msgs []prepared) ([]db.TopicPublishRow, error) {
			return st.q.TopicPublish(ctx, s.insertParams(t.tenant, t.name, msgs))
		},
		func(rows []db.TopicPublishRow, n int) bool {
			return len(rows) == n && !slices.ContainsFunc(rows, func(r db.TopicPublishRow) bool {
				return r.Outcome != db.OutcomeSent && r.Outcome != db.OutcomeDuplicate
			})
		},
		func(c *publishCall) bool { return s.publishAlone(ctx, st, c) })
}

func (c *publishCall) target() batchTarget  { return batchTarget{c.tenant, c.topic} }
func (c *publishCall) messages() []prepared { return c.msgs }
func (c *publishCall) fail(err error)       { c.err = err }

// publishAlone is one request's publish. It reports whether the statement
// ran out of st's lock timeout, unanswered.
func (s *Service) publishAlone(ctx context.Context, st statements, c *publishCall) (blocked bool) {
	p := s.insertParams(c.tenant, c.topic, c.msgs)
	var rows []db.TopicPublishRow
	var err error
	for attempt := 1; ; attempt++ {
		rows, err = st.q.TopicPublish(ctx, p)
		var pgErr *pgconn.PgError
		if attempt < publishAttempts && errors.As(err, &pgErr) && pgErr.Code == "40001" {
			continue
		}
		break
	}
	switch {
	case st.outsideLock(err):
		return true
	case db.IsUniqueViolation(err, "messages_message_id_queue_key"):
		// A group's queue holds a message of that id that is no copy of an
		// earlier publish of the key (a send's, or one moved in).
		c.err = &Error{Kind: KindIdempotencyConflict,
			Message: "a group's queue already holds a message with this messageId", Err: err}
	case err != nil:
		c.err = fromDB("publish", err)
	case len(rows) == 0:
		c.err = topicNotFound(c.topic)
	default:
		c.answer(rows, 0)
	}
	return false
}

// answer gives a publish its results from the rows of the statement that
// carried it, positions off+1 to off+len(msgs), or its refusal.
func (c *publishCall) answer(rows []db.TopicPublishRow, off int) {
	c.results = make([]PublishResult, len(c.msgs))
	var refused issues
	conflicted := false
	for _, r := range rows {
		i := int(r.Pos) - 1 - off
		if i < 0 || i >= len(c.msgs) {
			continue
		}
		switch r.Outcome {
		case db.OutcomeConflict:
			conflicted = true
			refused.add(join(c.pathOf(i), "messageId"), "was already published with different content")
			continue
		case db.OutcomeGroupRequired:
			refused.add(join(c.pathOf(i), "groupId"), "is required: the topic is FIFO")
			continue
		case db.OutcomeGroupRefused:
			refused.add(join(c.pathOf(i), "groupId"), "is not allowed: the topic is not FIFO")
			continue
		}
		c.results[i] = PublishResult{MessageID: r.MessageID, DeliveredTo: int(r.DeliveredTo),
			Duplicate: r.Outcome == db.OutcomeDuplicate, PublishedAt: deref(r.PublishedAt)}
		c.woken = append(c.woken, r.Woken...)
	}
	if len(refused) > 0 {
		c.results, c.woken = nil, nil
		e := Invalid(refused...)
		if conflicted {
			e.Kind = KindIdempotencyConflict
		}
		c.err = e
	}
}

// TopicMessage is one published message's state in each group of a topic.
func (s *Service) TopicMessage(ctx context.Context, tenant, topic, messageID string) ([]TopicMessageGroup, error) {
	if err := checkQueueName("topic", topic); err != nil {
		return nil, err
	}
	if !IsID(messageID) {
		return nil, Invalid(Issue{Path: "messageId", Message: "must match ^[A-Za-z0-9._:-]{1,128}$"})
	}
	if _, err := s.q.TopicGet(ctx, db.TopicGetParams{Tenant: tenant, Name: topic}); err != nil {
		if errors.Is(db.NotFound(err), db.ErrNotFound) {
			return nil, topicNotFound(topic)
		}
		return nil, fromDB("topic message", err)
	}
	rows, err := s.q.TopicMessageAcross(ctx, db.TopicMessageAcrossParams{Tenant: tenant, Topic: topic,
		MessageID: messageID, Now: s.now()})
	if err != nil {
		return nil, fromDB("topic message", err)
	}
	out := make([]TopicMessageGroup, len(rows))
	for i, r := range rows {
		out[i] = TopicMessageGroup{Queue: r.Queue, State: r.State, ReceiveCount: int(r.ReceiveCount),
			Consumed: r.State == StateAcked || r.State == StateGone || r.State == StateDeadLettered}
		if r.State == StateInFlight {
			out[i].LeaseExpiresAt = r.VisibleAt
		}
	}
	return out, nil
}

// fillTopicBodies puts the stored body into each topic copy among rows:
// one statement, and only when there is a copy. The worker removes a body
// only once no copy names it, so a copy finds its body unless it was
// removed itself since it was read (a purge); it then keeps its empty one.
func (s *Service) fillTopicBodies(ctx context.Context, rows ...*db.SkipqMessage) error {
	var ids []int64
	for _, r := range rows {
		if id, ok := topicBodyID(r.Tags); ok {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	bodies, err := s.q.TopicBodies(ctx, ids)
	if err != nil {
		return fromDB("read topic bodies", err)
	}
	byID := make(map[int64][]byte, len(bodies))
	for _, b := range bodies {
		byID[b.ID] = b.Body
	}
	for _, r := range rows {
		if id, ok := topicBodyID(r.Tags); ok && byID[id] != nil {
			r.Body = byID[id]
		}
	}
	return nil
}

// pointers are the addresses of rows' elements.
func pointers(rows []db.SkipqMessage) []*db.SkipqMessage {
	out := make([]*db.SkipqMessage, len(rows))
	for i := range rows {
		out[i] = &rows[i]
	}
	return out
}

// topicBodyID is the stored body a topic copy's tags name.
func topicBodyID(tags []byte) (int64, bool) {
	// Most rows are no copies: a look for the key spares them the decoding.
	if !bytes.Contains(tags, []byte(`"`+topicBodyTagKey+`"`)) {
		return 0, false
	}
	var t struct {
		Body string `json:"skipq.body"`
	}
	if json.Unmarshal(tags, &t) != nil || t.Body == "" {
		return 0, false
	}
	id, err := strconv.ParseInt(t.Body, 10, 64)
	return id, err == nil
}

// PublishEachResult is one message's outcome of PublishEach.
type PublishEachResult struct {
	Result PublishResult
	Err    *Error
}

// PublishEach publishes each message of a batch on its own (a batch with
// "atomic": false): each reaches every matching group or none, and a
// message that fails fails alone. bad[i], when set, is why message i could
// not be read; it is answered as that message's error.
func (s *Service) PublishEach(ctx context.Context, tenant, topic string, in []MessageInput, bad []*Issue) ([]PublishEachResult, error) {
	if err := checkQueueName("topic", topic); err != nil {
		return nil, err
	}
	if err := checkBatch(in); err != nil {
		return nil, err
	}
	out := make([]PublishEachResult, len(in))
	for i := range in {
		if bad[i] != nil {
			out[i].Err = Invalid(*bad[i])
			continue
		}
		res, err := s.Publish(ctx, tenant, topic, in[i:i+1], func(int) string { return "" })
		var e *Error
		switch {
		case errors.As(err, &e) && e.Kind != KindInternal && e.Kind != KindUnavailable && e.Kind != KindNotFound:
			out[i].Err = e
		case err != nil:
			return nil, err
		default:
			out[i].Result = res[0]
		}
	}
	return out, nil
}
