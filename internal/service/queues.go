package service

import (
	"context"
	"errors"
	"time"

	"github.com/skipq/skipq/internal/db"
)

// Queue is a queue's settings and, when asked for, its stats.
type Queue struct {
	Name               string
	CreatedAt          time.Time
	VisibilitySeconds  int
	ReceiveWaitSeconds int
	DelaySeconds       int
	ExpirationSeconds  int
	MaxReceiveCount    int
	DeadLetterQueue    string
	DedupWindowSeconds int
	FIFO               bool
	// ContentBasedDeduplication: a send without a messageId is
	// deduplicated on its body's SHA-256 for DedupWindowSeconds.
	ContentBasedDeduplication bool
	// RetainAckedSeconds: an acked message is kept this long in state
	// acked (docs/API.md#model); 0 removes it at once.
	RetainAckedSeconds int
	// Trace: messages sent while it is on record their history
	// (docs/API.md#history), which follows them when they move.
	Trace bool
	Stats *QueueStats
}

// QueueStats are counted at request time. States are exclusive.
type QueueStats struct {
	Available int64
	Delayed   int64
	InFlight  int64
	// Acked counts the retained messages (RetainAckedSeconds), in none of
	// the other states.
	Acked int64
	// Groups counts the FIFO groups that have messages (0 on a standard
	// queue).
	Groups int64
	// OldestAvailableAt is when the oldest available message became
	// available (its delayedTo, else its sentAt); nil when none is.
	OldestAvailableAt *time.Time
}

// QueueSettings is a PUT body: nil fields keep their current (or default)
// values.
type QueueSettings struct {
	VisibilitySeconds  *int
	ReceiveWaitSeconds *int
	DelaySeconds       *int
	ExpirationSeconds  *int
	MaxReceiveCount    *int
	DeadLetterQueue    *string
	DedupWindowSeconds *int
	FIFO               *bool // fixed at creation
	// ContentBasedDeduplication: see Queue.
	ContentBasedDeduplication *bool
	// RetainAckedSeconds: see Queue.
	RetainAckedSeconds *int
	// Trace: see Queue.
	Trace *bool
}

func (s *Service) validateSettings(name string, in QueueSettings, minVisibility int) error {
	var is issues
	l := s.limits
	// A lease of 0 would let two receivers hold the same message.
	is.between("visibilitySeconds", in.VisibilitySeconds, minVisibility, l.MaxVisibilitySeconds)
	is.between("receiveWaitSeconds", in.ReceiveWaitSeconds, 0, l.MaxWaitSeconds)
	is.between("delaySeconds", in.DelaySeconds, 0, l.MaxDelaySeconds)
	is.between("expirationSeconds", in.ExpirationSeconds, 0, l.MaxExpirationSeconds)
	is.between("maxReceiveCount", in.MaxReceiveCount, 0, l.MaxReceiveCount)
	is.between("dedupWindowSeconds", in.DedupWindowSeconds, 0, maxDedupWindow)
	is.between("retainAckedSeconds", in.RetainAckedSeconds, 0, l.MaxExpirationSeconds)
	checkDeadLetterQueue(&is, "deadLetterQueue", name, in.DeadLetterQueue)
	return is.err()
}

// PutQueue creates a queue (created = true) or updates the given settings.
func (s *Service) PutQueue(ctx context.Context, tenant, name string, in QueueSettings) (q Queue, created bool, err error) {
	return s.putQueue(ctx, tenant, name, in, 1)
}

// PutQueueSQS is PutQueue with SQS's visibility range: 0 is allowed
// (docs/DESIGN.md#the-sqs-endpoint, D4), and a claim then leaves the message visible.
func (s *Service) PutQueueSQS(ctx context.Context, tenant, name string, in QueueSettings) (q Queue, created bool, err error) {
	return s.putQueue(ctx, tenant, name, in, 0)
}

func (s *Service) putQueue(ctx context.Context, tenant, name string, in QueueSettings, minVisibility int) (q Queue, created bool, err error) {
	if err := checkQueueName("queue", name); err != nil {
		return Queue{}, false, err
	}
	if err := s.validateSettings(name, in, minVisibility); err != nil {
		return Queue{}, false, err
	}
	if err := s.checkQueueType(ctx, tenant, name, in); err != nil {
		return Queue{}, false, err
	}
	var row db.SkipqQueue
	err = s.inTx(ctx, func(tx *db.Queries) error {
		inserted, err := tx.QueueInsert(ctx, db.QueueInsertParams{Tenant: tenant, Name: name,
			Fifo: in.FIFO != nil && *in.FIFO})
		if err != nil {
			return err
		}
		created = inserted == 1
		row, err = tx.QueueSettingsUpdate(ctx, db.QueueSettingsUpdateParams{
			Tenant:             tenant,
			Name:               name,
			VisibilitySeconds:  int32Ptr(in.VisibilitySeconds),
			ReceiveWaitSeconds: int32Ptr(in.ReceiveWaitSeconds),
			DelaySeconds:       int32Ptr(in.DelaySeconds),
			ExpirationSeconds:  int32Ptr(in.ExpirationSeconds),
			MaxReceiveCount:    int32Ptr(in.MaxReceiveCount),
			DeadLetterQueue:    in.DeadLetterQueue,
			DedupWindowSeconds: int32Ptr(in.DedupWindowSeconds),
			Fifo:               in.FIFO,
			ContentBasedDedup:  in.ContentBasedDeduplication,
		})
		if errors.Is(db.NotFound(err), db.ErrNotFound) {
			// The queue exists with the other type (created meanwhile): the
			// update changed nothing, and the transaction stores nothing.
			return Invalid(Issue{Path: "fifo", Message: "cannot change: fifo is fixed when the queue is created"})
		}
		if err != nil {
			return err
		}
		if in.RetainAckedSeconds != nil {
			err = tx.QueueRetentionSet(ctx, db.QueueRetentionSetParams{QueueID: row.ID,
				Seconds: int32(*in.RetainAckedSeconds)})
			if err != nil {
				return err
			}
		}
		if in.Trace != nil {
			if err := tx.QueueTraceSet(ctx, db.QueueTraceSetParams{QueueID: row.ID, Trace: *in.Trace}); err != nil {
				return err
			}
		}
		qs, err := queuesFromRows(ctx, tx, []db.SkipqQueue{row})
		if err != nil {
			return err
		}
		q = qs[0]
		return nil
	})
	if err != nil {
		return Queue{}, false, fromDB("put queue", err)
	}
	return q, created, nil
}

// queuesFromRows are the queues of rows, in their order, with the settings
// that tables beside skipq.queues hold: RetainAckedSeconds
// (skipq.queue_retention) and Trace (skipq.queue_trace), read in one
// statement for them all.
func queuesFromRows(ctx context.Context, q *db.Queries, rows []db.SkipqQueue) ([]Queue, error) {
	qs, ids := make([]Queue, len(rows)), make([]int64, len(rows))
	byID := make(map[int64]*Queue, len(rows))
	for i, r := range rows {
		qs[i], ids[i], byID[r.ID] = queueFromRow(r), r.ID, &qs[i]
	}
	side, err := q.QueueSideSettingsList(ctx, ids)
	if err != nil {
		return nil, err
	}
	for _, r := range side {
		byID[r.QueueID].RetainAckedSeconds, byID[r.QueueID].Trace = int(r.RetainAckedSeconds), r.Trace
	}
	return qs, nil
}

// checkQueueType refuses what the queue's type cannot have: a change of
// type (fifo is fixed at creation), and a FIFO queue whose dead-letter
// queue is an existing standard one (its messages would lose their
// groups). A dead-letter queue created later by a FIFO queue's move is
// FIFO.
func (s *Service) checkQueueType(ctx context.Context, tenant, name string, in QueueSettings) error {
	cur, err := s.queueByName(ctx, tenant, name)
	exists := err == nil
	if err != nil && KindOf(err) != KindNotFound {
		return err
	}
	if exists && in.FIFO != nil && *in.FIFO != cur.Fifo {
		return Invalid(Issue{Path: "fifo", Message: "cannot change: fifo is fixed when the queue is created"})
	}
	fifo := cur.Fifo || in.FIFO != nil && *in.FIFO
	if !fifo || in.DeadLetterQueue == nil || *in.DeadLetterQueue == "" {
		return nil
	}
	dlq, err := s.queueByName(ctx, tenant, *in.DeadLetterQueue)
	switch {
	case KindOf(err) == KindNotFound:
		return nil
	case err != nil:
		return err
	case !dlq.Fifo:
		return Invalid(Issue{Path: "deadLetterQueue", Message: "must be a FIFO queue: the queue is FIFO"})
	}
	return nil
}

// GetQueue returns a queue with its stats.
func (s *Service) GetQueue(ctx context.Context, tenant, name string) (Queue, error) {
	if err := checkQueueName("queue", name); err != nil {
		return Queue{}, err
	}
	row, err := s.queueByName(ctx, tenant, name)
	if err != nil {
		return Queue{}, err
	}
	st, err := s.q.QueueStats(ctx, db.QueueStatsParams{QueueID: row.ID, Now: s.now()})
	if err != nil {
		return Queue{}, fromDB("queue stats", err)
	}
	qs, err := queuesFromRows(ctx, s.q, []db.SkipqQueue{row})
	if err != nil {
		return Queue{}, fromDB("queue settings", err)
	}
	q := qs[0]
	q.Stats = &QueueStats{Available: st.Available, Delayed: st.Delayed, InFlight: st.InFlight, Acked: st.Acked,
		Groups: st.Groups}
	// min() over no rows is NULL, which sqlc can only type as any.
	if t, ok := st.OldestAvailableAt.(time.Time); ok {
		q.Stats.OldestAvailableAt = &t
	}
	return q, nil
}

// queueNamePage checks the parameters of a page of queues by name (limit,
// name prefix, cursor) and returns the name to continue after.
func queueNamePage(limit int, prefix, cursor string) (after string, err error) {
	var is issues
	is.between("limit", &limit, 1, maxListLimit)
	is.text("prefix", prefix)
	if err := is.err(); err != nil {
		return "", err
	}
	if after, err = decodeCursor(cursor); err != nil {
		return "", err
	}
	return after, checkTextKey("cursor", after)
}

// ListQueues lists a tenant's queues by name, after the cursor (the last
// name of the previous page). nextCursor is "" on the last page.
func (s *Service) ListQueues(ctx context.Context, tenant, prefix string, limit int, cursor string) (qs []Queue, nextCursor string, err error) {
	after, err := queueNamePage(limit, prefix, cursor)
	if err != nil {
		return nil, "", err
	}
	rows, err := s.q.QueueList(ctx, db.QueueListParams{
		Tenant: tenant, Prefix: prefix, After: after, MaxQueues: int32(limit + 1),
	})
	if err != nil {
		return nil, "", fromDB("list queues", err)
	}
	if len(rows) > limit {
		rows = rows[:limit]
		nextCursor = encodeCursor(rows[limit-1].Name)
	}
	if len(rows) == 0 {
		return nil, "", nil
	}
	if qs, err = queuesFromRows(ctx, s.q, rows); err != nil {
		return nil, "", fromDB("list queues", err)
	}
	return qs, nextCursor, nil
}

// DeleteQueue removes a queue and its messages in one transaction.
func (s *Service) DeleteQueue(ctx context.Context, tenant, name string) error {
	if err := checkQueueName("queue", name); err != nil {
		return err
	}
	err := s.inTx(ctx, func(q *db.Queries) error {
		id, err := q.QueueDelete(ctx, db.QueueDeleteParams{Tenant: tenant, Name: name})
		if err != nil {
			if errors.Is(db.NotFound(err), db.ErrNotFound) {
				return notFound("queue %q does not exist", name)
			}
			return err
		}
		_, err = s.deleteMessagesOf(ctx, q, id, nil)
		return err
	})
	return fromDB("delete queue", err)
}

// deleteMessagesOf removes, in q's transaction, the topic copies queue id has
// yet to make and then every message of it (in every state), and returns
// how many. Two statements, in that order: a claim making copies of a
// pending row the first waits for has committed them before the second's
// snapshot, which deletes them too.
func (s *Service) deleteMessagesOf(ctx context.Context, q *db.Queries, id int64, keyID *int64) (int64, error) {
	pending, err := q.TopicPendingDeleteByQueue(ctx, id)
	if err != nil {
		return 0, err
	}
	n, err := q.MessageDeleteByQueue(ctx, db.MessageDeleteByQueueParams{QueueID: id, KeyID: keyID, Now: s.now()})
	return n + pending, err
}

// PurgeQueue removes every message of a queue, in every state, and the
// topic copies it has yet to make, in one transaction.
func (s *Service) PurgeQueue(ctx context.Context, tenant, name string) (int64, error) {
	if err := checkQueueName("queue", name); err != nil {
		return 0, err
	}
	row, err := s.queueByName(ctx, tenant, name)
	if err != nil {
		return 0, err
	}
	var n int64
	err = s.inTx(ctx, func(q *db.Queries) (err error) {
		n, err = s.deleteMessagesOf(ctx, q, row.ID, keyIDOf(ctx))
		return err
	})
	return n, fromDB("purge queue", err)
}

func (s *Service) queueByName(ctx context.Context, tenant, name string) (db.SkipqQueue, error) {
	row, err := s.q.QueueGetByName(ctx, db.QueueGetByNameParams{Tenant: tenant, Name: name})
	if err != nil {
		if errors.Is(db.NotFound(err), db.ErrNotFound) {
			return row, notFound("queue %q does not exist", name)
		}
		return row, fromDB("get queue", err)
	}
	return row, nil
}

func queueFromRow(r db.SkipqQueue) Queue {
	return Queue{
		Name:               r.Name,
		CreatedAt:          r.CreatedAt,
		VisibilitySeconds:  int(r.VisibilitySeconds),
		ReceiveWaitSeconds: int(r.ReceiveWaitSeconds),
		DelaySeconds:       int(r.DelaySeconds),
		ExpirationSeconds:  int(r.ExpirationSeconds),
		MaxReceiveCount:    int(r.MaxReceiveCount),
		DeadLetterQueue:    r.DeadLetterQueue,
		DedupWindowSeconds: int(r.DedupWindowSeconds),
		FIFO:               r.Fifo,

		ContentBasedDeduplication: r.ContentBasedDedup,
	}
}

func int32Ptr(v *int) *int32 {
	if v == nil {
		return nil
	}
	x := int32(*v)
	return &x
}
