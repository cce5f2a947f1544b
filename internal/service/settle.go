package service

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/skipq/skipq/internal/db"
)

// Each settle operation is one short transaction whose statements find rows
// by primary key and check the lease token in the statement that changes
// them: a stale or forged handle changes nothing.

// Ack removes the messages.
func (s *Service) Ack(ctx context.Context, handles []string) (SettleResult, error) {
	c, err := s.settle(ctx, s.acks, handles, settleArgs{}, "ack")
	return c.res, err
}

// Nack makes the messages available again now; a message on its last allowed
// delivery is dead-lettered (or discarded) in the same transaction instead.
// Each records the nack, with reason (nil: none), as its last failure, and
// A dead letter carries it as the cause of its death (docs/API.md#model).
func (s *Service) Nack(ctx context.Context, handles []string, reason *string) (SettleResult, error) {
	if err := checkReason(reason); err != nil {
		return SettleResult{}, err
	}
	c, err := s.settle(ctx, s.nacks, handles, settleArgs{reason: reason}, "nack")
	return c.res, err
}

// MaxReasonBytes bounds a nack's reason (UTF-8 bytes).
const MaxReasonBytes = 1024

// Causes of a failed delivery (Failure.Cause, DeadLetter.Cause).
const (
	CauseNack         = "nack"
	CauseLeaseExpired = "lease_expired"
)

// settleArgs are what a settle request gives besides its handles.
type settleArgs struct {
	seconds int     // extends: the new lease length
	reason  *string // nacks: why
	keyID   *int64  // the request's API key, for the messages' history
}

// settleCall is one request's part of a shared settle: concurrent acks,
// nacks and extends on this node each share one statement (sharer), and
// so one commit, for many requests.
type settleCall struct {
	rs    receipts
	args  settleArgs
	res   SettleResult
	until map[string]time.Time // extends: the new lease end of each handle settled
	err   error
}

func settleSize(c *settleCall) int { return len(c.rs.tokens) }

// settleQueue is the queue of a settle's first handle: the one its lock
// waits are counted by (sharer.queue). A settle naming several queues
// is rare, and counted by one.
func settleQueue(c *settleCall) string {
	if len(c.rs.queueIDs) == 0 {
		return ""
	}
	return strconv.FormatInt(c.rs.queueIDs[0], 10)
}

// settle runs one request's settle through its sharer.
func (s *Service) settle(ctx context.Context, sh *sharer[settleCall], handles []string, args settleArgs, op string) (*settleCall, error) {
	args.keyID = keyIDOf(ctx)
	c := &settleCall{rs: parseReceipts(handles), args: args}
	if len(c.rs.tokens) == 0 {
		c.res = c.rs.result(nil)
		return c, nil
	}
	if err := sh.do(ctx, c); err != nil {
		return c, fromDB(op, err)
	}
	if c.err != nil {
		return c, fromDB(op, c.err)
	}
	return c, nil
}

// merged is the handles of several requests as one statement's arrays. A
// handle named by two requests is sent once and credited to the first: a
// message is settled once, and counted once.
type merged struct {
	queueIDs, sequences []int64
	tokens              [][]byte
	seconds             []int32
	reasons             []*string
	keyIDs              []int64 // 0: none (db's encoding of a missing key id)
	owner               map[string]*settleCall
}

func merge(calls []*settleCall) merged {
	n := 0
	for _, c := range calls {
		n += len(c.rs.tokens)
	}
	m := merged{owner: make(map[string]*settleCall, n),
		queueIDs: make([]int64, 0, n), sequences: make([]int64, 0, n), tokens: make([][]byte, 0, n),
		seconds: make([]int32, 0, n), reasons: make([]*string, 0, n), keyIDs: make([]int64, 0, n)}
	for _, c := range calls {
		for i, h := range c.rs.handles {
			if !c.rs.valid[i] || m.owner[h] != nil {
				continue
			}
			m.owner[h] = c
			r := c.rs.parsed[i]
			m.queueIDs = append(m.queueIDs, r.queueID)
			m.sequences = append(m.sequences, r.sequence)
			m.tokens = append(m.tokens, r.token)
			m.seconds = append(m.seconds, int32(c.args.seconds))
			m.reasons = append(m.reasons, c.args.reason)
			m.keyIDs = append(m.keyIDs, orZero(c.args.keyID))
		}
	}
	return m
}

// answer gives each request its result from the deliveries the statement
// settled.
func (m merged) answer(calls []*settleCall, changed map[settledKey]bool) {
	for _, c := range calls {
		c.res = c.rs.resultFor(changed, func(h string) bool { return m.owner[h] == c })
	}
}

// failed handles a shared statement that failed as a whole. When it ran
// out of its lock timeout (it waited on a row another transaction holds,
// and settled nothing), its calls are returned, blocked, to run on their
// own (sharer). Otherwise a request alone gets the error, and several are
// each run again by themselves, so that each gets its own answer.
func failed(ctx context.Context, st statements, calls []*settleCall, err error,
	run func(context.Context, statements, []*settleCall) []*settleCall) (blocked []*settleCall) {
	switch {
	case st.outsideLock(err):
		return calls
	case len(calls) == 1:
		calls[0].err = err
		return nil
	}
	for _, c := range calls {
		blocked = append(blocked, run(ctx, st, []*settleCall{c})...)
	}
	return blocked
}

// ackParams are the ack statement's arguments for m's handles.
func (m merged) ackParams(now *time.Time) db.MessageAckByReceiptParams {
	return db.MessageAckByReceiptParams{QueueIds: m.queueIDs, Sequences: m.sequences, Tokens: m.tokens,
		KeyIds: m.keyIDs, Now: now}
}

func (s *Service) runAcks(ctx context.Context, st statements, calls []*settleCall) (blocked []*settleCall) {
	m := merge(calls)
	rows, err := st.q.MessageAckByReceipt(ctx, m.ackParams(s.now()))
	if err != nil {
		return failed(ctx, st, calls, err, s.runAcks)
	}
	m.answer(calls, s.ackedRows(ctx, rows))
	return nil
}

// ackedRows wakes receivers for what an ack statement freed, counts what it
// removed, and returns which deliveries it settled.
func (s *Service) ackedRows(ctx context.Context, rows []db.MessageAckByReceiptRow) map[settledKey]bool {
	changed := map[settledKey]bool{}
	acked := map[int64]int{}
	unblocked := map[int64]int{}
	for _, r := range rows {
		changed[settled(r.QueueID, r.Sequence, r.Token)] = true
		acked[r.QueueID]++
		if r.Grouped {
			// Its group may take its next message now (docs/FIFO.md): wake a
			// receiver as a send would.
			unblocked[r.QueueID] = 1
		}
	}
	for id, n := range unblocked {
		s.hub.Publish(id, n)
	}
	s.observeByID(ctx, acked, s.obs.MessagesAcked)
	return changed
}

func (s *Service) runNacks(ctx context.Context, st statements, calls []*settleCall) (blocked []*settleCall) {
	m := merge(calls)
	rows, err := st.q.MessageNack(ctx, db.MessageNackParams{
		Now: s.now(), QueueIds: m.queueIDs, Sequences: m.sequences, Tokens: m.tokens, Reasons: m.reasons,
		ServerMaxReceiveCount: int32(s.limits.MaxReceiveCount), KeyIds: m.keyIDs})
	if err != nil {
		return failed(ctx, st, calls, err, s.runNacks)
	}
	changed := map[settledKey]bool{}
	available := map[int64]int{}
	nackedBy := map[int64]int{}
	var moves []db.MessageDeadLetterRow
	for _, r := range rows {
		changed[settled(r.QueueID, r.Sequence, r.Token)] = true
		switch {
		case r.MovedTo == nil && !r.Discarded:
			available[r.QueueID]++
			nackedBy[r.QueueID]++
		default:
			if r.MovedTo != nil {
				available[*r.MovedTo]++
			}
			moves = append(moves, db.MessageDeadLetterRow{SourceQueueID: r.QueueID, SourceSequence: r.Sequence,
				DeadLetterQueueID: r.MovedTo})
		}
	}
	for id, n := range available {
		s.hub.Publish(id, n)
	}
	m.answer(calls, changed)
	s.observeByID(ctx, nackedBy, s.obs.MessagesNacked)
	s.ObserveDeadLetters(moves)
	return nil
}

func (s *Service) runExtends(ctx context.Context, st statements, calls []*settleCall) (blocked []*settleCall) {
	m := merge(calls)
	rows, err := st.q.MessageSetVisibilityByReceipt(ctx, db.MessageSetVisibilityByReceiptParams{
		Now: s.now(), VisibilitySeconds: m.seconds,
		QueueIds: m.queueIDs, Sequences: m.sequences, Tokens: m.tokens, KeyIds: m.keyIDs})
	if err != nil {
		return failed(ctx, st, calls, err, s.runExtends)
	}
	changed := map[settledKey]bool{}
	until := map[settledKey]time.Time{}
	for _, r := range rows {
		k := settled(r.QueueID, r.Sequence, r.Token)
		changed[k], until[k] = true, r.VisibleAt
	}
	m.answer(calls, changed)
	for _, c := range calls {
		c.until = map[string]time.Time{}
		for i, h := range c.rs.handles {
			if t, ok := until[c.rs.parsed[i].key()]; ok && c.rs.valid[i] && m.owner[h] == c {
				c.until[h] = t
			}
		}
	}
	return nil
}

// VisibilityResult adds the new lease end of each settled handle.
type VisibilityResult struct {
	SettleResult
	VisibleUntil map[string]time.Time // by receipt handle
}

// SetVisibility makes each lease end seconds from now; the handles stay
// valid. 0 releases the message at once and is a nack (docs/API.md#model: "nack /
// visibility 0"): the handle goes stale, and a last allowed delivery is
// dead-lettered at once.
func (s *Service) SetVisibility(ctx context.Context, handles []string, seconds int) (VisibilityResult, error) {
	if seconds < 0 || seconds > s.limits.MaxVisibilitySeconds {
		return VisibilityResult{}, Invalid(Issue{Path: "visibilitySeconds", Message: betweenMsg(0, s.limits.MaxVisibilitySeconds)})
	}
	res := VisibilityResult{VisibleUntil: map[string]time.Time{}}
	if seconds == 0 {
		nacked, err := s.Nack(ctx, handles, nil)
		if err != nil {
			return VisibilityResult{}, err
		}
		now := s.nowOr(time.Now())
		failed := map[string]bool{}
		for _, f := range nacked.Failed {
			failed[f.ReceiptHandle] = true
		}
		for _, h := range handles {
			if !failed[h] {
				res.VisibleUntil[h] = now
			}
		}
		res.SettleResult = nacked
		return res, nil
	}
	c, err := s.settle(ctx, s.extends, handles, settleArgs{seconds: seconds}, "change visibility")
	if err != nil {
		return VisibilityResult{}, err
	}
	if c.until != nil {
		res.VisibleUntil = c.until
	}
	res.SettleResult = c.res
	return res, nil
}

// Requeue moves in-flight messages to queue (created if missing) in their
// own tenant, as available messages with a fresh delivery state.
func (s *Service) Requeue(ctx context.Context, handles []string, queue string) (SettleResult, error) {
	if err := checkQueueName("queue", queue); err != nil {
		return SettleResult{}, err
	}
	rs := parseReceipts(handles)
	if len(rs.tokens) == 0 {
		return rs.result(nil), nil
	}
	// The destination lives in each message's own tenant; receipts carry no
	// credentials, so the function takes the tenant from the source queue.
	rows, err := s.q.MessageRequeue(ctx, db.MessageRequeueParams{
		Now: s.now(), QueueIds: rs.queueIDs, Sequences: rs.sequences, Tokens: rs.tokens,
		ToQueue: queue, ServerMaxReceiveCount: int32(s.limits.MaxReceiveCount),
		KeyIds: slices.Repeat([]int64{orZero(keyIDOf(ctx))}, len(rs.tokens))})
	if db.IsQueueTypeMismatch(err) {
		return SettleResult{}, &Error{Kind: KindQueueTypeMismatch,
			Message: fmt.Sprintf("cannot requeue between a FIFO and a standard queue (%q)", queue), Err: err}
	}
	if err != nil {
		return SettleResult{}, fromDB("requeue", err)
	}
	changed := map[settledKey]bool{}
	available := map[int64]int{}
	for _, m := range rows {
		changed[settled(m.SourceQueueID, m.SourceSequence, m.SourceToken)] = true
		available[m.DestinationQueueID]++
	}
	for id, n := range available {
		s.hub.Publish(id, n)
	}
	return rs.result(changed), nil
}
