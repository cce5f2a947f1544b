package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/wake"
)

// Message is a message as receivers and browsers see it.
type Message struct {
	MessageID     string
	ReceiptHandle string // "" for peeks and autoAck
	Queue         string
	Sequence      int64
	ClientID      string
	Metadata      string
	Body          []byte
	BodyBinary    bool
	Tags          map[string]string
	// SQS is what the message carries for SQS (SQSTagKey, which is not
	// among Tags); nil when none.
	SQS             *SQSData
	SentAt          time.Time
	FirstReceivedAt *time.Time
	ReceiveCount    int
	VisibleUntil    *time.Time
	DelayedTo       *time.Time
	ExpiresAt       *time.Time
	ReRoutedFrom    *string
	DeadLetteredAt  *time.Time
	GroupID         *string // nil on a standard queue
	LastFailure     *Failure
	DeadLetter      *DeadLetter // nil unless dead-lettered (with its cause recorded)
	// AckedAt is when a retained message was acked (docs/API.md#model); nil for
	// every other.
	AckedAt *time.Time
}

// Failure is a message's latest failed delivery (docs/API.md#model).
type Failure struct {
	Cause        string  // CauseNack or CauseLeaseExpired
	Reason       *string // the nack's reason
	At           time.Time
	ReceiveCount int
}

// DeadLetter is why a message was dead-lettered: its last delivery in
// SourceQueue failed so, at ReceiveCount.
type DeadLetter struct {
	Cause        string
	Reason       *string
	ReceiveCount int
	SourceQueue  string
	At           time.Time
}

// ReceiveOptions are a receive request's fields; nil means the default.
type ReceiveOptions struct {
	MaxMessages       *int
	VisibilitySeconds *int
	WaitSeconds       *int
	IsPeek            bool
	AutoAck           bool
	// MaxMessagesPerGroup is how many messages a receive on a FIFO queue
	// takes from one group (1 … MaxMessagesPerGroup; default 1). A
	// standard queue has no groups and ignores it.
	MaxMessagesPerGroup *int
}

// MaxMessagesPerGroup bounds ReceiveOptions.MaxMessagesPerGroup (SQS's
// batch), and with it how far into a group a claim reads: a group's
// in-flight messages are always among its first ten (skipq.group_release).
const MaxMessagesPerGroup = 10

func (s *Service) validateReceive(queue string, o ReceiveOptions, minVisibility int) error {
	var is issues
	if msg := ValidQueueName(queue); msg != "" {
		is.add("queue", "%s", msg)
	}
	is.between("maxMessages", o.MaxMessages, 1, s.limits.MaxReceiveMessages)
	is.between("visibilitySeconds", o.VisibilitySeconds, minVisibility, s.limits.MaxVisibilitySeconds)
	is.between("waitSeconds", o.WaitSeconds, 0, s.limits.MaxWaitSeconds)
	is.between("maxMessagesPerGroup", o.MaxMessagesPerGroup, 1, MaxMessagesPerGroup)
	if o.IsPeek && o.AutoAck {
		is.add("autoAck", "cannot be combined with isPeek")
	}
	return is.err()
}

// Receive claims up to MaxMessages available messages, waiting up to
// WaitSeconds for the first one. A waiting receive holds no database
// connection: it parks in the hub between claims. It returns early, with
// nothing, when ctx ends or the node shuts down.
func (s *Service) Receive(ctx context.Context, tenant, queue string, o ReceiveOptions) ([]Message, error) {
	return s.receive(ctx, tenant, queue, o, 1)
}

// ReceiveSQS is Receive with SQS's visibility range: 0 is allowed
// (docs/DESIGN.md#the-sqs-endpoint, D4), and the message is delivered and stays available.
func (s *Service) ReceiveSQS(ctx context.Context, tenant, queue string, o ReceiveOptions) ([]Message, error) {
	msgs, err := s.receive(ctx, tenant, queue, o, 0)
	if err != nil || len(msgs) == 0 || o.VisibilitySeconds == nil || *o.VisibilitySeconds != 0 {
		return msgs, err
	}
	var p db.SQSReadyAgainParams
	for _, m := range msgs {
		r, _ := parseReceipt(m.ReceiptHandle)
		p.QueueIds, p.Sequences, p.Tokens = append(p.QueueIds, r.queueID), append(p.Sequences, r.sequence), append(p.Tokens, r.token)
	}
	ids, err := s.q.SQSReadyAgain(ctx, p)
	if err != nil {
		// Delivered all the same: the lease-end timer readies them.
		s.log.Warn("SQS receive with visibility 0: readying again failed", "err", err)
		return msgs, nil
	}
	if len(ids) > 0 {
		s.hub.Publish(ids[0], len(ids))
	}
	return msgs, nil
}

// AckAndReceive acks handles and then receives as Receive does: the ack and
// the first claim are one transaction and one round trip (a consumer's "ack
// these, give me more"), so the claim already sees what the ack freed. The
// ack is settled whatever the receive then finds; its result is per handle,
// as Ack's (a malformed or stale handle fails alone). Should the first claim
// find nothing, the receive waits as Receive does, the ack committed.
func (s *Service) AckAndReceive(ctx context.Context, tenant, queue string, handles []string, o ReceiveOptions) ([]Message, SettleResult, error) {
	if err := s.validateReceive(queue, o, 1); err != nil {
		return nil, SettleResult{}, err
	}
	if len(handles) > MaxReceiptHandles {
		return nil, SettleResult{}, Invalid(Issue{Path: "ack", Message: fmt.Sprintf("must hold at most %d handles", MaxReceiptHandles)})
	}
	rs := parseReceipts(handles)
	if len(rs.tokens) == 0 {
		msgs, err := s.poll(ctx, tenant, queue, o, s.claim)
		return msgs, rs.result(nil), err
	}
	var res SettleResult
	first := func(ctx context.Context, tenant, queue string, max int, o ReceiveOptions) ([]Message, bool, error) {
		msgs, more, acked, err := s.claimAfterAck(ctx, tenant, queue, max, o, rs)
		res = acked
		return msgs, more, err
	}
	msgs, err := s.poll(ctx, tenant, queue, o, first)
	return msgs, res, err
}

func (s *Service) receive(ctx context.Context, tenant, queue string, o ReceiveOptions, minVisibility int) ([]Message, error) {
	if err := s.validateReceive(queue, o, minVisibility); err != nil {
		return nil, err
	}
	return s.poll(ctx, tenant, queue, o, s.claim)
}

// claimFunc makes one claim of a receive: its messages, and whether more
// may be available.
type claimFunc func(ctx context.Context, tenant, queue string, max int, o ReceiveOptions) ([]Message, bool, error)

// poll receives with first as its first claim and plain claims after it:
// if first finds nothing it waits, parked in the hub, up to the wait.
func (s *Service) poll(ctx context.Context, tenant, queue string, o ReceiveOptions, first claimFunc) ([]Message, error) {
	max := 1
	if o.MaxMessages != nil {
		max = *o.MaxMessages
	}
	msgs, _, err := first(ctx, tenant, queue, max, o)
	if err != nil || len(msgs) > 0 {
		return msgs, err
	}

	queueID, wait, err := s.waitTarget(ctx, tenant, queue, o.WaitSeconds)
	if err != nil {
		return nil, err
	}
	if wait <= 0 {
		return nil, nil
	}
	// Every waiting receive holds a goroutine, its connection's buffers and
	// a hub entry until it ends: past the node's cap, refuse at once rather
	// than let open long polls grow the node without bound.
	if !s.hub.Park() {
		return nil, ErrTooManyWaiters
	}
	defer s.hub.Unpark()
	deadline := time.NewTimer(time.Duration(wait) * time.Second)
	defer deadline.Stop()
	for {
		w := s.hub.Register(queueID)
		msgs, more, err := s.claim(ctx, tenant, queue, max, o)
		if err != nil || len(msgs) > 0 {
			s.hub.Unregister(queueID, w)
			if more {
				// There may be more: pass the wake-up on to the next waiter.
				s.hub.Wake(queueID, 1)
			}
			return msgs, err
		}
		select {
		case <-w.C():
		case <-deadline.C:
			s.hub.Leave(queueID, w)
			return nil, nil
		case <-ctx.Done():
			s.hub.Leave(queueID, w)
			return nil, nil
		case <-s.hub.Closing():
			s.hub.Leave(queueID, w)
			return nil, nil
		}
		if queueID == wake.MissingQueue {
			if queueID, _, err = s.waitTarget(ctx, tenant, queue, &wait); err != nil {
				return nil, err
			}
		}
	}
}

// waitTarget resolves what a receive waits on: the queue's id (wake.MissingQueue
// when it does not exist yet) and the wait in seconds (the queue's default
// when not given; 1 s for a missing queue, the default of a new one).
func (s *Service) waitTarget(ctx context.Context, tenant, queue string, waitSeconds *int) (id int64, wait int, err error) {
	row, err := s.queueByName(ctx, tenant, queue)
	id, wait = row.ID, int(row.ReceiveWaitSeconds)
	if KindOf(err) == KindNotFound {
		id, wait, err = wake.MissingQueue, 1, nil
	}
	if waitSeconds != nil {
		wait = *waitSeconds
	}
	return id, wait, err
}

// claimTimeout bounds one claim of a long-poll, whose request has no
// overall deadline shorter than its wait.
const claimTimeout = 10 * time.Second

// claim runs one claim (or peek, or claim-and-delete) and returns the
// messages in sequence order, and whether more may be available: the claim
// took max messages or stopped at the response budget.
func (s *Service) claim(reqCtx context.Context, tenant, queue string, max int, o ReceiveOptions) ([]Message, bool, error) {
	ctx, cancel := context.WithTimeout(reqCtx, claimTimeout)
	defer cancel()
	var rows []db.SkipqMessage
	var err error
	mode := claimMode(o)
	shared := sharesClaim(mode, max)
	if shared {
		rows, _, err = s.claimShared(ctx, tenant, queue, o.VisibilitySeconds, nil)
	} else {
		// skipq.message_claim runs the claim of the queue's kind and
		// returns the rows in answer order.
		rows, err = s.claimQueries(mode).MessageClaim(ctx, s.claimParams(ctx, tenant, queue, max, o, mode))
		if o.AutoAck {
			autoAcked(rows, s.nowOr(time.Now()))
		}
	}
	return s.claimed(reqCtx, tenant, queue, max, o, rows, err, shared)
}

// sharesClaim reports whether a receive's claim of mode and max is made
// together with other receives' (claimShared): a leasing claim of one.
func sharesClaim(mode string, max int) bool {
	return mode == claimReadyFirst && max == 1
}

// claimQueries runs a receive's own claim of mode, committing as it must: a
// claim-and-delete is an ack, and a peek changes nothing.
func (s *Service) claimQueries(mode string) *db.Queries {
	switch mode {
	case "delete":
		return s.autoAcks
	case "peek":
		return s.q
	}
	return s.batchClaims
}

// claimMode is the mode skipq.message_claim runs for a receive's options.
func claimMode(o ReceiveOptions) string {
	switch {
	case o.IsPeek:
		return "peek"
	case o.AutoAck:
		return "delete"
	}
	return claimReadyFirst
}

// claimParams are one receive's claim of up to max messages.
func (s *Service) claimParams(ctx context.Context, tenant, queue string, max int, o ReceiveOptions, mode string) db.MessageClaimParams {
	if mode == claimReadyFirst {
		mode = s.order.mode(tenant, queue, max)
	}
	return db.MessageClaimParams{Tenant: tenant, Queue: queue, Now: s.now(),
		VisibilitySeconds: int32Ptr(o.VisibilitySeconds), MaxMessages: int32(max),
		MaxPerGroup: intOr(o.MaxMessagesPerGroup, 1), MaxResponseBytes: int64(s.limits.MaxResponseBytes),
		MessageOverhead: messageOverhead(queue), Mode: mode, KeyID: keyIDOf(ctx)}
}

// claimAfterAck is claim behind an ack of rs, in one transaction and round
// trip (db.AckThenClaim). A single-message claim shares it with other
// requests' (claimShared), acks and all; a larger one runs alone.
func (s *Service) claimAfterAck(reqCtx context.Context, tenant, queue string, max int, o ReceiveOptions, rs receipts) ([]Message, bool, SettleResult, error) {
	ctx, cancel := context.WithTimeout(reqCtx, claimTimeout)
	defer cancel()
	mode := claimMode(o)
	var rows []db.SkipqMessage
	var res SettleResult // on an error nothing was acked either
	var err error
	shared := sharesClaim(mode, max)
	if shared {
		rows, res, err = s.claimShared(ctx, tenant, queue, o.VisibilitySeconds, &rs)
	} else {
		var acked []db.MessageAckByReceiptRow
		m := merge([]*settleCall{{rs: rs, args: settleArgs{keyID: keyIDOf(ctx)}}})
		acked, rows, err = db.AckThenClaim(ctx, s.pool, db.AckThenClaimSetup(false, s.commits.ack),
			m.ackParams(s.now()), s.claimParams(ctx, tenant, queue, max, o, mode))
		if err == nil {
			res = rs.result(s.ackedRows(ctx, acked))
			if o.AutoAck {
				autoAcked(rows, s.nowOr(time.Now()))
			}
		}
	}
	msgs, more, err := s.claimed(reqCtx, tenant, queue, max, o, rows, err, shared)
	return msgs, more, res, err
}

// claimed turns a claim's rows (or its error) into a receive's messages,
// and whether more may be available: the claim took max messages or
// stopped at the response budget. A shared claim (claimShared) told the
// claim order what it returned, once for all its calls.
func (s *Service) claimed(reqCtx context.Context, tenant, queue string, max int, o ReceiveOptions, rows []db.SkipqMessage, err error, shared bool) ([]Message, bool, error) {
	budget, overhead := int64(s.limits.MaxResponseBytes), messageOverhead(queue)
	if err != nil {
		if errors.Is(reqCtx.Err(), context.Canceled) {
			return nil, false, nil // the client left; nothing was claimed
		}
		return nil, false, fromDB("receive", err)
	}
	if err := s.fillTopicBodies(reqCtx, pointers(rows)...); err != nil {
		return nil, false, err
	}
	var size int64
	for _, r := range rows {
		size += estimatedRowBytes(r, overhead)
	}
	more := len(rows) == max || size >= budget
	if !shared && !o.IsPeek && !o.AutoAck {
		s.order.saw(tenant, queue, rows, !more)
	}
	if len(rows) > 0 && !o.IsPeek {
		s.names.remember(rows[0].QueueID, tenant, queue)
		s.obs.MessagesReceived(tenant, queue, len(rows))
		if o.AutoAck {
			s.obs.MessagesAcked(tenant, queue, len(rows))
		}
	}
	return receivedMessages(queue, rows, !o.IsPeek && !o.AutoAck), more, nil
}

// receivedMessages are a claim's rows as a receive's messages, with their
// receipt handles and leases when leased. A message points at its row's
// body and lease end rather than copying them.
func receivedMessages(queue string, rows []db.SkipqMessage, leased bool) []Message {
	msgs := make([]Message, len(rows))
	for i := range rows {
		r := &rows[i]
		msgs[i] = messageFromRow(queue, *r)
		if leased {
			msgs[i].ReceiptHandle = encodeReceipt(r.QueueID, r.Sequence, r.LeaseToken)
			msgs[i].VisibleUntil = &r.VisibleAt
		}
	}
	return msgs
}

// autoAcked reports a removed delivery as the receive that made it: its
// count includes it.
func autoAcked(rows []db.SkipqMessage, now time.Time) {
	for i := range rows {
		rows[i].ReceiveCount++
		if rows[i].FirstReceivedAt == nil {
			rows[i].FirstReceivedAt = new(now)
		}
	}
}

// MessageOverheadBytes is the response-budget estimate of a received
// message's fixed JSON: field names, punctuation, the receipt handle, the
// sequence and counts, six timestamps and bodyEncoding, and deadLetter's
// sourceQueue and at, which its stored form lacks (lastFailure and the rest
// of deadLetter are measured with the tags they are stored in). The queue
// name is added per queue; the variable fields are measured in the claim
// statement (skipq.message_wire_size,
// internal/migrations/current/functions/message_wire_size.sql). handlers
// tests hold the HTTP encoding to it.
const MessageOverheadBytes = 700 + maxQueueNameBytes

// messageOverhead is the per-message estimate the claim statements add to
// each message's measured fields.
func messageOverhead(queue string) int64 {
	return MessageOverheadBytes + int64(len(queue))
}

// estimatedRowBytes is the claim's size estimate of one message
// (skipq.message_wire_size, a FIFO message's group id and overhead), the
// same sum in Go (tags are the JSON text the jsonb column returns): whether
// the claim stopped at the budget says that more may be waiting, and the
// claim returns message rows only (a column more would break the previous
// release's statements during an upgrade, DESIGN.md "Online migrations").
func estimatedRowBytes(r db.SkipqMessage, overhead int64) int64 {
	n := int64(len(r.Body))
	if r.BodyBinary {
		n = (n + 2) / 3 * 4
	}
	n += int64(len(r.Metadata) + len(r.Tags) + len(r.MessageID) + len(r.ClientID))
	if r.ReRoutedFrom != nil {
		n += int64(len(*r.ReRoutedFrom))
	}
	if r.GroupID != nil {
		n += int64(len(*r.GroupID))
	}
	return n + overhead
}

func (s *Service) nowOr(t time.Time) time.Time {
	if n := s.now(); n != nil {
		return *n
	}
	return t
}

func messageFromRow(queue string, r db.SkipqMessage) Message {
	tags := map[string]string{}
	if string(r.Tags) != noTags { // most messages: nothing to decode
		_ = json.Unmarshal(r.Tags, &tags) // written by us from a map[string]string
	}
	sqs := parseSQSData(tags[SQSTagKey])
	failure, dead := parseFailure(tags[failureTagKey]), parseFailure(tags[deadLetterTagKey])
	acked := parseAcked(tags[ackedTagKey])
	// What skipq keeps in its reserved keys was read above (or, as the
	// trace id, is shown nowhere); the message's tags are the sender's,
	// and a topic's copy shows its topic.
	maps.DeleteFunc(tags, func(k, _ string) bool { return strings.HasPrefix(k, ReservedTagPrefix) && k != TopicTagKey })
	m := Message{
		MessageID:       r.MessageID,
		Queue:           queue,
		Sequence:        r.Sequence,
		ClientID:        r.ClientID,
		Metadata:        r.Metadata,
		Body:            r.Body,
		BodyBinary:      r.BodyBinary,
		Tags:            tags,
		SQS:             sqs,
		SentAt:          r.SentAt,
		FirstReceivedAt: r.FirstReceivedAt,
		ReceiveCount:    int(r.ReceiveCount),
		DelayedTo:       r.DelayedTo,
		ExpiresAt:       r.ExpiresAt,
		ReRoutedFrom:    r.ReRoutedFrom,
		DeadLetteredAt:  r.DeadLetteredAt,
		GroupID:         r.GroupID,
		LastFailure:     failure,
		DeadLetter:      deadLetterOf(dead, r),
	}
	if acked != nil {
		m.AckedAt, m.GroupID = &acked.At, acked.Group
	}
	return m
}

// A message's failures ride in its tags under reserved keys, as JSON
// (internal/migrations/00023_failure_reasons.sql): the latest failed delivery, and
// on a dead letter the one that dead-lettered it.
const (
	failureTagKey    = "skipq.failure"
	deadLetterTagKey = "skipq.deadLetter"
)

// parseFailure reads a stored failure; nil when there is none.
func parseFailure(doc string) *Failure {
	if doc == "" {
		return nil
	}
	var f struct {
		Cause        string    `json:"cause"`
		Reason       *string   `json:"reason"`
		At           time.Time `json:"at"`
		ReceiveCount int       `json:"receiveCount"`
	}
	if json.Unmarshal([]byte(doc), &f) != nil { // written by skipq's own statements
		return nil
	}
	return &Failure{Cause: f.Cause, Reason: f.Reason, At: f.At.UTC(), ReceiveCount: f.ReceiveCount}
}

// deadLetterOf is why a dead letter died: f, from its source queue, when it
// moved. Nil for a message that is not a dead letter (a redriven or
// requeued one), or was dead-lettered before skipq recorded why.
func deadLetterOf(f *Failure, r db.SkipqMessage) *DeadLetter {
	if f == nil || r.DeadLetteredAt == nil || r.ReRoutedFrom == nil {
		return nil
	}
	return &DeadLetter{Cause: f.Cause, Reason: f.Reason, ReceiveCount: f.ReceiveCount, SourceQueue: *r.ReRoutedFrom,
		At: *r.DeadLetteredAt}
}

// claimCall is one single-message receive's part of a shared claim.
type claimCall struct {
	tenant, queue string
	keyID         *int64 // recorded in the history of what it receives
	visibility    *int
	ack           *settleCall // handles to ack first (AckAndReceive), and the result; nil for none
	rows          []db.SkipqMessage
	err           error
}

func claimSize(*claimCall) int { return 1 }

// claimShared claims one message, together with the single-message
// receives that arrive while a claim of this node runs (sharer): one
// statement and one commit for all of them, and waiters woken together are
// served by one claim. Receives of more than one message claim on their
// own: they already share a commit among their messages, and splitting a
// batch would have to respect each request's response budget.
//
// With ack (AckAndReceive), those handles are acked first in the same
// transaction: the shared claim of such calls runs behind one ack of all
// their handles (db.AckThenClaim), and each call gets its own handles'
// result.
func (s *Service) claimShared(ctx context.Context, tenant, queue string, visibility *int, ack *receipts) ([]db.SkipqMessage, SettleResult, error) {
	call := &claimCall{tenant: tenant, queue: queue, keyID: keyIDOf(ctx), visibility: visibility}
	if ack != nil {
		call.ack = &settleCall{rs: *ack, args: settleArgs{keyID: call.keyID}}
	}
	if err := s.claims.do(ctx, call); err != nil {
		return nil, SettleResult{}, err
	}
	var res SettleResult
	if call.ack != nil && call.err == nil {
		res = call.ack.res
	}
	return call.rows, res, call.err
}

// runClaims claims, per queue and visibility, as many messages as there are
// calls, and hands them out in answer order, one each (a FIFO queue's from
// as many groups: the receivers share no group, and get the groups in
// rotation order). A call left without a message (the queue had fewer)
// answers empty, as a claim of its own would have.
//
// The claims of several queues are one statement and one commit
// (claimQueuesTogether), topic copies' bodies included: a publish to a
// topic wakes a waiter on each of its groups' queues together, and a claim
// statement per queue (at most claimConcurrency at once, all answered when
// the slowest ended) and then a body read per receive made the median of
// ten receivers wait for about three rounds of claims and a body read
// (docs/PERFORMANCE.md, "Topics: wake-ups of every group, and a replay of
// 1,000,000"). Claims
// behind acks, and all claims when that statement fails, run at once, each
// its own statement and commit (at most claimConcurrency).
//
// Claims skip locked rows and groups, but a claim that still ran out of its
// lock timeout returns its calls, blocked, to claim on their own (sharer).
func (s *Service) runClaims(ctx context.Context, st statements, calls []*claimCall) (blocked []*claimCall) {
	// Calls share a claim when they would make the same one, under the
	// same API key (the history names one per statement).
	groups := map[claimKey][]*claimCall{}
	var order []claimKey
	for _, c := range calls {
		k := claimKey{c.tenant, c.queue, -1, 0}
		if c.keyID != nil {
			k.keyID = *c.keyID
		}
		if c.visibility != nil {
			k.visibility = *c.visibility
		}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], c)
	}
	if len(order) == 1 {
		return s.claimTogether(ctx, st, order[0].tenant, order[0].queue, groups[order[0]])
	}
	var plain, withAcks []claimKey
	for _, k := range order {
		if slices.ContainsFunc(groups[k], func(c *claimCall) bool { return c.ack != nil }) {
			withAcks = append(withAcks, k)
		} else {
			plain = append(plain, k)
		}
	}
	if len(plain) > 1 {
		var failed bool
		if blocked, failed = s.claimQueuesTogether(ctx, st, plain, groups); !failed {
			plain = nil
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, claimConcurrency)
	for _, k := range append(withAcks, plain...) {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			b := s.claimTogether(ctx, st, k.tenant, k.queue, groups[k])
			mu.Lock()
			blocked = append(blocked, b...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return blocked
}

// claimKey is what the calls of one shared claim have in common.
type claimKey struct {
	tenant, queue string
	visibility    int   // -1: the queue's default
	keyID         int64 // 0: none
}

// claimQueuesTogether makes the claims of several queues (keys) in one
// statement, each as claimTogether would. It reports failed when that
// statement failed as a whole, other than by the lock timeout (which
// returns every call blocked): nothing was claimed, and the claims are to
// be made one by one.
func (s *Service) claimQueuesTogether(ctx context.Context, st statements, keys []claimKey, groups map[claimKey][]*claimCall) (blocked []*claimCall, failed bool) {
	p := db.MessageClaimQueuesParams{Now: s.now()}
	for _, k := range keys {
		g := groups[k]
		p.Tenants, p.Queues = append(p.Tenants, k.tenant), append(p.Queues, k.queue)
		p.MaxMessages = append(p.MaxMessages, int32(len(g)))
		p.VisibilitySeconds = append(p.VisibilitySeconds, int32Ptr(g[0].visibility))
		p.KeyIDs = append(p.KeyIDs, g[0].keyID)
		p.MaxResponseBytes = append(p.MaxResponseBytes, int64(s.limits.MaxResponseBytes)*int64(len(g)))
		p.MessageOverheads = append(p.MessageOverheads, messageOverhead(k.queue))
		p.Modes = append(p.Modes, s.order.mode(k.tenant, k.queue, len(g)))
	}
	rows, err := st.q.MessageClaimQueues(ctx, p)
	switch {
	case st.outsideLock(err):
		for _, k := range keys {
			blocked = append(blocked, groups[k]...)
		}
		return blocked, false
	case err != nil:
		return nil, true
	}
	claimed := make([][]db.SkipqMessage, len(keys))
	for _, r := range rows {
		i := int(r.Claim) - 1
		if g := groups[keys[i]]; len(claimed[i]) < len(g) {
			g[len(claimed[i])].rows = []db.SkipqMessage{r.Message}
			claimed[i] = append(claimed[i], r.Message)
		}
	}
	for i, k := range keys {
		s.order.saw(k.tenant, k.queue, claimed[i], len(claimed[i]) < len(groups[k]))
	}
	return nil, false
}

// claimConcurrency bounds the claims of one shared batch that run at once,
// each on a connection of its own, so that a batch of many queues leaves
// the pool to the node's other statements.
const claimConcurrency = 4

// claimTogether is one shared claim: as many messages of queue as calls, one
// each, with the calls' acks ahead of it when they carry any.
func (s *Service) claimTogether(ctx context.Context, st statements, tenant, queue string, group []*claimCall) (blocked []*claimCall) {
	claim := db.MessageClaimParams{Tenant: tenant, Queue: queue, Now: s.now(),
		MaxMessages: int32(len(group)), VisibilitySeconds: int32Ptr(group[0].visibility), MaxPerGroup: 1,
		MaxResponseBytes: int64(s.limits.MaxResponseBytes) * int64(len(group)),
		MessageOverhead:  messageOverhead(queue), Mode: s.order.mode(tenant, queue, len(group)), KeyID: group[0].keyID}
	var acks []*settleCall
	for _, c := range group {
		if c.ack != nil {
			acks = append(acks, c.ack)
		}
	}
	var rows []db.SkipqMessage
	var err error
	if len(acks) == 0 {
		rows, err = st.q.MessageClaim(ctx, claim)
	} else {
		// The group's acks, all in one statement, ahead of its claim
		// and in its transaction.
		m := merge(acks)
		var acked []db.MessageAckByReceiptRow
		if acked, rows, err = db.AckThenClaim(ctx, s.pool, st.ackClaimSetup, m.ackParams(s.now()), claim); err == nil {
			m.answer(acks, s.ackedRows(ctx, acked))
		}
	}
	switch {
	case st.outsideLock(err):
		blocked = append(blocked, group...)
		return blocked
	case err != nil && len(group) == 1:
		group[0].err = err
		return blocked
	case err != nil:
		// The shared claim failed as a whole (and claimed nothing):
		// each request on its own, so that each gets its own answer.
		for _, c := range group {
			blocked = append(blocked, s.runClaims(ctx, st, []*claimCall{c})...)
		}
		return blocked
	}
	for i, c := range group {
		if i < len(rows) {
			c.rows = rows[i : i+1]
		}
	}
	s.order.saw(tenant, queue, rows, len(rows) < len(group))
	return blocked
}
