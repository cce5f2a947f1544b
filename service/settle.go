package service

import (
	"context"
	"time"

	"github.com/skipq/skipq/db"
)

// Each settle operation is one short transaction whose statements find rows
// by primary key and check the lease token in the statement that changes
// them: a stale or forged handle changes nothing.

// Ack removes the messages. Concurrent acks on this node share one
// statement (sharer): one commit for many requests.
func (s *Service) Ack(ctx context.Context, handles []string) (SettleResult, error) {
	rs := parseReceipts(handles)
	if len(rs.tokens) == 0 {
		return rs.result(nil), nil
	}
	call := &ackCall{rs: rs}
	if err := s.acks.do(ctx, call); err != nil {
		return SettleResult{}, fromDB("ack", err)
	}
	return call.res, call.err
}

// ackCall is one request's part of a shared ack.
type ackCall struct {
	rs  receipts
	res SettleResult
	err error
}

func ackSize(c *ackCall) int { return len(c.rs.tokens) }

// runAcks acks the handles of several requests in one statement. A handle
// named by two requests is sent once and credited to the first: a message is
// settled once, and counted once.
func (s *Service) runAcks(ctx context.Context, calls []*ackCall) {
	var p db.MessageAckByReceiptParams
	owner := map[string]*ackCall{}
	for _, c := range calls {
		for i, h := range c.rs.handles {
			if !c.rs.valid[i] || owner[h] != nil {
				continue
			}
			owner[h] = c
			r := c.rs.parsed[i]
			p.QueueIds = append(p.QueueIds, r.queueID)
			p.Sequences = append(p.Sequences, r.sequence)
			p.Tokens = append(p.Tokens, r.token)
		}
	}
	rows, err := s.q.MessageAckByReceipt(ctx, p)
	if err != nil {
		if len(calls) == 1 {
			calls[0].err = fromDB("ack", err)
			return
		}
		// The shared statement failed as a whole: each request on its own,
		// so that each gets its own answer.
		for _, c := range calls {
			s.runAcks(ctx, []*ackCall{c})
		}
		return
	}
	changed := map[settledKey]bool{}
	acked := map[int64]int{}
	for _, r := range rows {
		changed[settled(r.QueueID, r.Sequence, r.Token)] = true
		acked[r.QueueID]++
	}
	for _, c := range calls {
		c.res = c.rs.resultFor(changed, func(h string) bool { return owner[h] == c })
	}
	s.observeByID(ctx, acked, s.obs.MessagesAcked)
}

// Nack makes the messages available again now; a message on its last allowed
// delivery is dead-lettered (or discarded) in the same transaction instead.
func (s *Service) Nack(ctx context.Context, handles []string) (SettleResult, error) {
	rs := parseReceipts(handles)
	if len(rs.tokens) == 0 {
		return rs.result(nil), nil
	}
	changed := map[settledKey]bool{}
	available := map[int64]int{}
	nackedBy := map[int64]int{}
	var moves []db.MessageDeadLetterRow
	err := s.inTx(ctx, func(q *db.Queries) error {
		nacked, err := q.MessageNackByReceipt(ctx, db.MessageNackByReceiptParams{
			Now: s.now(), QueueIds: rs.queueIDs, Sequences: rs.sequences, Tokens: rs.tokens})
		if err != nil {
			return err
		}
		for _, r := range nacked {
			changed[settled(r.QueueID, r.Sequence, r.Token)] = true
			available[r.QueueID]++
			nackedBy[r.QueueID]++
		}
		if len(nacked) == len(rs.tokens) {
			return nil
		}
		final, err := q.MessageFinalByReceipt(ctx, db.MessageFinalByReceiptParams{
			QueueIds: rs.queueIDs, Sequences: rs.sequences, Tokens: rs.tokens})
		if err != nil || len(final) == 0 {
			return err
		}
		keys := make([]deadLetterKey, len(final))
		for i, f := range final {
			keys[i] = deadLetterKey{f.QueueID, f.Sequence, f.DeadLetterQueue}
			changed[settled(f.QueueID, f.Sequence, f.Token)] = true
		}
		moves, err = s.deadLetter(ctx, q, keys)
		for id, n := range deadLetterArrivals(moves) {
			available[id] += n
		}
		return err
	})
	if err != nil {
		return SettleResult{}, fromDB("nack", err)
	}
	for id, n := range available {
		s.hub.Publish(id, n)
	}
	s.observeByID(ctx, nackedBy, s.obs.MessagesNacked)
	s.observeMoves(moves)
	return rs.result(changed), nil
}

// VisibilityResult adds the new lease end of each settled handle.
type VisibilityResult struct {
	SettleResult
	VisibleUntil map[string]time.Time // by receipt handle
}

// SetVisibility makes each lease end seconds from now; the handles stay
// valid. 0 releases the message at once and is a nack (SPEC §3: "nack /
// visibility 0"): the handle goes stale, and a last allowed delivery is
// dead-lettered at once.
func (s *Service) SetVisibility(ctx context.Context, handles []string, seconds int) (VisibilityResult, error) {
	if seconds < 0 || seconds > s.limits.MaxVisibilitySeconds {
		return VisibilityResult{}, Invalid(Issue{Path: "visibilitySeconds", Message: betweenMsg(0, s.limits.MaxVisibilitySeconds)})
	}
	res := VisibilityResult{VisibleUntil: map[string]time.Time{}}
	if seconds == 0 {
		nacked, err := s.Nack(ctx, handles)
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
	rs := parseReceipts(handles)
	if len(rs.tokens) == 0 {
		res.SettleResult = rs.result(nil)
		return res, nil
	}
	rows, err := s.q.MessageSetVisibilityByReceipt(ctx, db.MessageSetVisibilityByReceiptParams{
		Now: s.now(), VisibilitySeconds: int32(seconds),
		QueueIds: rs.queueIDs, Sequences: rs.sequences, Tokens: rs.tokens})
	if err != nil {
		return VisibilityResult{}, fromDB("change visibility", err)
	}
	changed := map[settledKey]bool{}
	until := map[settledKey]time.Time{}
	for _, r := range rows {
		k := settled(r.QueueID, r.Sequence, r.Token)
		changed[k], until[k] = true, r.VisibleAt
	}
	for i, h := range rs.handles {
		if t, ok := until[rs.parsed[i].key()]; ok && rs.valid[i] {
			res.VisibleUntil[h] = t
		}
	}
	res.SettleResult = rs.result(changed)
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
	changed := map[settledKey]bool{}
	available := map[int64]int{}
	err := s.inTx(ctx, func(q *db.Queries) error {
		// The destination lives in each message's own tenant; receipts carry
		// no credentials, so the tenant comes from the source queue.
		sources, err := q.QueueTenantsByID(ctx, rs.queueIDs)
		if err != nil {
			return err
		}
		tenantOf := map[int64]string{}
		for _, src := range sources {
			tenantOf[src.ID] = src.Tenant
		}
		byTenant := map[string]*receipts{}
		for i := range rs.queueIDs {
			t, ok := tenantOf[rs.queueIDs[i]]
			if !ok {
				continue // no such queue: the handle is stale
			}
			if byTenant[t] == nil {
				byTenant[t] = &receipts{}
			}
			g := byTenant[t]
			g.queueIDs = append(g.queueIDs, rs.queueIDs[i])
			g.sequences = append(g.sequences, rs.sequences[i])
			g.tokens = append(g.tokens, rs.tokens[i])
		}
		for tenant, g := range byTenant {
			if err := q.QueueCreateMissing(ctx, db.QueueCreateMissingParams{Tenant: tenant, Names: []string{queue}}); err != nil {
				return err
			}
			dest, err := s.queueByName(ctx, q, tenant, queue)
			if err != nil {
				return err
			}
			moved, err := q.MessageRequeueByReceipt(ctx, db.MessageRequeueByReceiptParams{
				Now: s.now(), QueueIds: g.queueIDs, Sequences: g.sequences, Tokens: g.tokens,
				DestinationQueueID: dest.ID, ServerMaxReceiveCount: int32(s.limits.MaxReceiveCount)})
			if err != nil {
				return err
			}
			for _, m := range moved {
				changed[settled(m.SourceQueueID, m.SourceSequence, m.SourceToken)] = true
			}
			available[dest.ID] += len(moved)
		}
		return nil
	})
	if err != nil {
		return SettleResult{}, fromDB("requeue", err)
	}
	for id, n := range available {
		s.hub.Publish(id, n)
	}
	return rs.result(changed), nil
}
