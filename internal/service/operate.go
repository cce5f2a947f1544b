package service

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/skipq/skipq/internal/db"
)

// Message states as browse reports them.
const (
	StateAvailable = "available"
	StateDelayed   = "delayed"
	StateInFlight  = "in_flight"
)

// BrowsedMessage is a message with its state and when it became or becomes
// receivable (nil for an acked one: never again).
type BrowsedMessage struct {
	Message
	State     string
	VisibleAt *time.Time
}

func browsed(queue string, m db.SkipqMessage, state string) BrowsedMessage {
	b := BrowsedMessage{Message: messageFromRow(queue, m), State: state}
	if state != StateAcked {
		b.VisibleAt = &m.VisibleAt
	}
	return b
}

// BrowseMessages lists a queue's messages by sequence, optionally in one
// state, after an opaque cursor. nextCursor is "" on the last page.
func (s *Service) BrowseMessages(ctx context.Context, tenant, queue, state string, limit int, cursor string) ([]BrowsedMessage, string, error) {
	var is issues
	if msg := ValidQueueName(queue); msg != "" {
		is.add("queue", "%s", msg)
	}
	switch state {
	case "", StateAvailable, StateDelayed, StateInFlight, StateAcked:
	default:
		is.add("state", "must be available, delayed, in_flight or acked")
	}
	is.between("limit", &limit, 1, maxListLimit)
	after, err := decodeSequenceCursor(cursor)
	if err != nil {
		is = append(is, err.(*Error).Issues...)
	}
	if err := is.err(); err != nil {
		return nil, "", err
	}
	q, err := s.queueByName(ctx, tenant, queue)
	if err != nil {
		return nil, "", err
	}
	budget, overhead := int64(s.limits.MaxResponseBytes), messageOverhead(queue)
	rows, err := s.q.MessageBrowse(ctx, db.MessageBrowseParams{
		QueueID: q.ID, AfterSequence: after, State: state, MaxMessages: int32(limit + 1), Now: s.now(),
		MaxResponseBytes: budget, MessageOverhead: overhead})
	if err != nil {
		return nil, "", fromDB("browse", err)
	}
	slices.SortFunc(rows, func(a, b db.MessageBrowseRow) int {
		return cmp.Compare(a.SkipqMessage.Sequence, b.SkipqMessage.Sequence)
	})
	// The one row past the limit says there is another page; so does a page
	// the response budget cut short (the next one may then be empty).
	var size int64
	for _, r := range rows {
		size += estimatedRowBytes(r.SkipqMessage, overhead)
	}
	next := ""
	if more := len(rows) > limit || size >= budget; more && len(rows) > 0 {
		rows = rows[:min(len(rows), limit)]
		next = encodeSequenceCursor(rows[len(rows)-1].SkipqMessage.Sequence)
	}
	msgs := make([]*db.SkipqMessage, len(rows))
	for i := range rows {
		msgs[i] = &rows[i].SkipqMessage
	}
	if err := s.fillTopicBodies(ctx, msgs...); err != nil {
		return nil, "", err
	}
	out := make([]BrowsedMessage, len(rows))
	for i, r := range rows {
		out[i] = browsed(queue, r.SkipqMessage, r.State)
	}
	return out, next, nil
}

// GetMessage returns one message of a queue with its state.
func (s *Service) GetMessage(ctx context.Context, tenant, queue, messageID string) (BrowsedMessage, error) {
	q, err := s.operatedQueue(ctx, tenant, queue, messageID)
	if err != nil {
		return BrowsedMessage{}, err
	}
	row, err := s.q.MessageGetByID(ctx, db.MessageGetByIDParams{QueueID: q.ID, MessageID: messageID, Now: s.now()})
	if err != nil {
		if errors.Is(db.NotFound(err), db.ErrNotFound) {
			return BrowsedMessage{}, notFound("message %q is not in queue %q", messageID, queue)
		}
		return BrowsedMessage{}, fromDB("get message", err)
	}
	if err := s.fillTopicBodies(ctx, &row.SkipqMessage); err != nil {
		return BrowsedMessage{}, err
	}
	return browsed(queue, row.SkipqMessage, row.State), nil
}

// DeleteMessage removes one message; NotFound when there was none.
func (s *Service) DeleteMessage(ctx context.Context, tenant, queue, messageID string) error {
	q, err := s.operatedQueue(ctx, tenant, queue, messageID)
	if err != nil {
		return err
	}
	gone, err := s.q.MessageDeleteByID(ctx, db.MessageDeleteByIDParams{QueueID: q.ID, MessageID: messageID,
		KeyID: keyIDOf(ctx), Now: s.now()})
	if err != nil {
		return fromDB("delete message", err)
	}
	if gone.Deleted == 0 {
		return notFound("message %q is not in queue %q", messageID, queue)
	}
	if gone.GroupID != "" {
		// A FIFO message: its group may take its next message now.
		err := s.q.GroupRelease(ctx, db.GroupReleaseParams{QueueIds: []int64{q.ID}, GroupIds: []string{gone.GroupID}})
		if err != nil {
			return fromDB("delete message", err)
		}
		s.hub.Publish(q.ID, 1)
	}
	return nil
}

// operatedQueue validates a queue + message id pair and resolves the queue.
func (s *Service) operatedQueue(ctx context.Context, tenant, queue, messageID string) (db.SkipqQueue, error) {
	var is issues
	if msg := ValidQueueName(queue); msg != "" {
		is.add("queue", "%s", msg)
	}
	if !IsID(messageID) {
		is.add("messageId", "must match ^[A-Za-z0-9._:-]{1,128}$")
	}
	if err := is.err(); err != nil {
		return db.SkipqQueue{}, err
	}
	return s.queueByName(ctx, tenant, queue)
}

// DeadLetteredFilter narrows a dead-letter listing; "" matches any.
type DeadLetteredFilter struct {
	SourceQueue string
	Cause       string // CauseNack or CauseLeaseExpired
}

// ListDeadLettered lists a tenant's dead-lettered messages, newest
// deadLetteredAt first, optionally only those from a source queue or of a
// cause.
func (s *Service) ListDeadLettered(ctx context.Context, tenant string, f DeadLetteredFilter, limit int, cursor string) ([]Message, string, error) {
	var is issues
	if f.SourceQueue != "" {
		if msg := ValidQueueName(f.SourceQueue); msg != "" {
			is.add("sourceQueue", "%s", msg)
		}
	}
	switch f.Cause {
	case "", CauseNack, CauseLeaseExpired:
	default:
		is.add("cause", "must be %s or %s", CauseNack, CauseLeaseExpired)
	}
	is.between("limit", &limit, 1, maxListLimit)
	afterAt, afterSeq, err := decodeDLQCursor(cursor)
	if err != nil {
		is = append(is, err.(*Error).Issues...)
	}
	if err := is.err(); err != nil {
		return nil, "", err
	}
	// Messages of any of the tenant's queues: estimate every queue name at
	// its longest.
	budget, overhead := int64(s.limits.MaxResponseBytes), int64(MessageOverheadBytes+maxQueueNameBytes)
	rows, err := s.q.MessageDeadLetteredList(ctx, db.MessageDeadLetteredListParams{
		Tenant: tenant, SourceQueue: f.SourceQueue, Cause: f.Cause, AfterDeadLetteredAt: afterAt, AfterSequence: afterSeq,
		MaxMessages: int32(limit + 1), MaxResponseBytes: budget, MessageOverhead: overhead})
	if err != nil {
		return nil, "", fromDB("list dead-lettered messages", err)
	}
	// Newest deadLetteredAt first, then highest sequence: the cursor's order.
	slices.SortFunc(rows, func(a, b db.MessageDeadLetteredListRow) int {
		x, y := a.SkipqMessage, b.SkipqMessage
		return cmp.Or(x.DeadLetteredAt.Compare(*y.DeadLetteredAt)*-1, cmp.Compare(y.Sequence, x.Sequence))
	})
	var size int64
	for _, r := range rows {
		size += estimatedRowBytes(r.SkipqMessage, overhead)
	}
	next := ""
	if more := len(rows) > limit || size >= budget; more && len(rows) > 0 {
		rows = rows[:min(len(rows), limit)]
		last := rows[len(rows)-1].SkipqMessage
		next = encodeDLQCursor(*last.DeadLetteredAt, last.Sequence)
	}
	msgs := make([]*db.SkipqMessage, len(rows))
	for i := range rows {
		msgs[i] = &rows[i].SkipqMessage
	}
	if err := s.fillTopicBodies(ctx, msgs...); err != nil {
		return nil, "", err
	}
	out := make([]Message, len(rows))
	for i, r := range rows {
		out[i] = messageFromRow(r.QueueName, r.SkipqMessage)
	}
	return out, next, nil
}

// Redriven names a message a redrive created.
type Redriven struct {
	Queue     string
	MessageID string
	Sequence  int64
}

// Redrive moves one dead-lettered message to toQueue ("" = where it came
// from) as a new message, in one transaction. A second redrive racing it
// waits for it and then finds the message gone (NotFound).
func (s *Service) Redrive(ctx context.Context, tenant, queue, messageID, toQueue string) (Redriven, error) {
	if toQueue != "" {
		if err := checkQueueName("toQueue", toQueue); err != nil {
			return Redriven{}, err
		}
	}
	q, err := s.operatedQueue(ctx, tenant, queue, messageID)
	if err != nil {
		return Redriven{}, err
	}
	var rows []db.MessageRedriveRow
	err = s.inTx(ctx, func(tx *db.Queries) error {
		m, err := tx.MessageLockByID(ctx, db.MessageLockByIDParams{QueueID: q.ID, MessageID: messageID})
		if err != nil {
			if errors.Is(db.NotFound(err), db.ErrNotFound) {
				return notFound("message %q is not in queue %q", messageID, queue)
			}
			return err
		}
		if m.DeadLetteredAt == nil {
			return &Error{Kind: KindNotDeadLettered, Message: fmt.Sprintf("message %q was not dead-lettered", messageID)}
		}
		rows, err = s.redriveLocked(ctx, tx, q, []int64{m.Sequence}, []*string{m.ReRoutedFrom}, toQueue)
		if err == nil && len(rows) != 1 {
			err = fmt.Errorf("redrive moved %d messages, want 1", len(rows))
		}
		return err
	})
	if err != nil {
		return Redriven{}, fromDB("redrive", err)
	}
	s.publishRedriven(rows)
	return Redriven{Queue: rows[0].QueueName, MessageID: rows[0].MessageID, Sequence: rows[0].Sequence}, nil
}

// redriveBatch is how many messages one bulk-redrive transaction moves.
const redriveBatch = 500

// RedriveQueue moves up to max dead-lettered messages of a queue, in
// transactions of redriveBatch, and reports how many are left. Two nodes may
// run it at once: each batch takes its rows with SKIP LOCKED.
func (s *Service) RedriveQueue(ctx context.Context, tenant, queue, toQueue string, max int) (moved, remaining int64, err error) {
	var is issues
	if msg := ValidQueueName(queue); msg != "" {
		is.add("queue", "%s", msg)
	}
	if toQueue != "" {
		if msg := ValidQueueName(toQueue); msg != "" {
			is.add("toQueue", "%s", msg)
		}
	}
	if max < 1 || max > 10000 {
		is.add("maxMessages", "must be between 1 and 10000")
	}
	if err := is.err(); err != nil {
		return 0, 0, err
	}
	q, err := s.queueByName(ctx, tenant, queue)
	if err != nil {
		return 0, 0, err
	}
	for moved < int64(max) {
		rows, err := s.redriveSome(ctx, q, toQueue, int(min(redriveBatch, int64(max)-moved)))
		if err != nil {
			return moved, 0, fromDB("redrive", err)
		}
		if len(rows) == 0 {
			break
		}
		moved += int64(len(rows))
	}
	remaining, err = s.q.MessageDeadLetteredCount(ctx, q.ID)
	if err != nil {
		return moved, 0, fromDB("redrive", err)
	}
	return moved, remaining, nil
}

// redriveSome moves up to max dead-lettered messages of q in one
// transaction, taking its rows with SKIP LOCKED, and wakes their receivers.
func (s *Service) redriveSome(ctx context.Context, q db.SkipqQueue, toQueue string, max int) ([]db.MessageRedriveRow, error) {
	var rows []db.MessageRedriveRow
	err := s.inTx(ctx, func(tx *db.Queries) error {
		picked, err := tx.MessageDeadLetteredPick(ctx, db.MessageDeadLetteredPickParams{
			QueueID: q.ID, MaxMessages: int32(max)})
		if err != nil || len(picked) == 0 {
			return err
		}
		seqs := make([]int64, len(picked))
		from := make([]*string, len(picked))
		for i, p := range picked {
			seqs[i], from[i] = p.Sequence, p.ReRoutedFrom
		}
		rows, err = s.redriveLocked(ctx, tx, q, seqs, from, toQueue)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.publishRedriven(rows)
	return rows, nil
}

// redriveLocked creates the destinations and moves the locked messages.
func (s *Service) redriveLocked(ctx context.Context, tx *db.Queries, q db.SkipqQueue, seqs []int64, from []*string, toQueue string) ([]db.MessageRedriveRow, error) {
	var dests []string
	if toQueue != "" {
		dests = []string{toQueue}
	} else {
		seen := map[string]bool{}
		for _, f := range from {
			if f != nil && !seen[*f] {
				seen[*f] = true
				dests = append(dests, *f)
			}
		}
	}
	if err := tx.QueueCreateMissing(ctx, db.QueueCreateMissingParams{Tenant: q.Tenant, Names: dests, Fifo: q.Fifo}); err != nil {
		return nil, err
	}
	// Into FIFO queues, messages join their groups' ends (the groups a
	// redrive empties here are pruned by the worker's GroupPrune).
	if err := tx.GroupEnterForRedrive(ctx, db.GroupEnterForRedriveParams{
		QueueID: q.ID, Sequences: seqs, ToQueue: toQueue}); err != nil {
		return nil, err
	}
	return tx.MessageRedrive(ctx, db.MessageRedriveParams{
		QueueID: q.ID, Sequences: seqs, ToQueue: toQueue, Now: s.now(),
		ServerMaxReceiveCount: int32(s.limits.MaxReceiveCount), KeyID: keyIDOf(ctx)})
}

// publishRedriven wakes receivers of the queues that redriven messages
// entered available; call it after the moving transaction committed.
func (s *Service) publishRedriven(rows []db.MessageRedriveRow) {
	available := map[int64]int{}
	for _, r := range rows {
		if r.DelayedTo == nil {
			available[r.QueueID]++
		}
	}
	for id, n := range available {
		s.hub.Publish(id, n)
	}
}

// Sequence cursors: the last sequence of the previous page.
func encodeSequenceCursor(seq int64) string {
	return encodeCursor(string(binary.BigEndian.AppendUint64(nil, uint64(seq))))
}

func decodeSequenceCursor(cursor string) (int64, error) {
	if cursor == "" {
		return 0, nil
	}
	raw, err := decodeCursor(cursor)
	if err != nil || len(raw) != 8 {
		return 0, Invalid(Issue{Path: "cursor", Message: "is not a cursor this server issued"})
	}
	return int64(binary.BigEndian.Uint64([]byte(raw))), nil
}

// DLQ cursors: the last (deadLetteredAt, sequence) of the previous page.
func encodeDLQCursor(at time.Time, seq int64) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(at.UnixMicro()))
	return encodeCursor(string(binary.BigEndian.AppendUint64(b, uint64(seq))))
}

func decodeDLQCursor(cursor string) (*time.Time, int64, error) {
	if cursor == "" {
		return nil, 0, nil
	}
	raw, err := decodeCursor(cursor)
	if err != nil || len(raw) != 16 {
		return nil, 0, Invalid(Issue{Path: "cursor", Message: "is not a cursor this server issued"})
	}
	at := time.UnixMicro(int64(binary.BigEndian.Uint64([]byte(raw[:8])))).UTC()
	return &at, int64(binary.BigEndian.Uint64([]byte(raw[8:]))), nil
}
