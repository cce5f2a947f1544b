package service

import (
	"context"
	"errors"
	"time"

	"github.com/skipq/skipq/internal/db"
)

// QueueGauge is a queue's row on the console's queues page. Its counts
// are read at request time when it holds fewer than ConsoleCountedNow
// messages (CountedNow), else they are the gauge snapshot's of CountedAt
// (nil when the queue is newer than the snapshot). DeadLettered, the
// messages that came from it and wait in a dead-letter queue, is always
// the snapshot's.
type QueueGauge struct {
	FIFO                                       bool // a FIFO queue (docs/FIFO.md)
	Name                                       string
	Available, Delayed, InFlight, DeadLettered *int64
	OldestAvailableAt                          *time.Time
	CountedAt                                  *time.Time
	CountedNow                                 bool
	// DeadLetterQueue: some queue of the tenant names it as its
	// deadLetterQueue, so its messages are (mostly) dead letters.
	DeadLetterQueue bool
}

// ConsoleCountedNow bounds the queues whose counts the queues page reads at
// request time: a larger queue shows the snapshot. Counting reads about a
// page (buffer) per message, since a queue's messages lie among the other
// queues' (measured: a page of 50 queues of 999 messages cost 50,000
// buffers, 580 ms on a loaded machine), so a poll of 50 queues reads at
// most 5,000 messages, and none of a queue the snapshot counted larger.
const ConsoleCountedNow = 100

// QueueGauges lists a tenant's queues by name with their counts, in pages
// like ListQueues. The console polls it: it reads at most
// ConsoleCountedNow messages of each queue.
func (s *Service) QueueGauges(ctx context.Context, tenant, prefix string, limit int, cursor string) ([]QueueGauge, string, error) {
	after, err := queueNamePage(limit, prefix, cursor)
	if err != nil {
		return nil, "", err
	}
	rows, err := s.q.ConsoleQueueList(ctx, db.ConsoleQueueListParams{
		Tenant: tenant, Prefix: prefix, After: after, MaxQueues: int32(limit + 1)})
	if err != nil {
		return nil, "", fromDB("list queue gauges", err)
	}
	next := ""
	if len(rows) > limit {
		rows = rows[:limit]
		next = encodeCursor(rows[limit-1].Name)
	}
	out := make([]QueueGauge, len(rows))
	var ids []int64 // the queues small enough to count now, as far as the snapshot knows
	at := map[int64]int{}
	for i, r := range rows {
		if r.Available == nil || *r.Available+*r.Delayed+*r.InFlight < ConsoleCountedNow {
			ids = append(ids, r.ID)
			at[r.ID] = i
		}
		out[i] = QueueGauge{Name: r.Name, FIFO: r.Fifo, Available: r.Available, Delayed: r.Delayed, InFlight: r.InFlight,
			DeadLettered: r.DeadLettered, OldestAvailableAt: r.OldestAvailableAt, CountedAt: r.CountedAt,
			DeadLetterQueue: r.DeadLetterQueue}
	}
	if len(ids) == 0 {
		return out, next, nil
	}
	counts, err := s.q.ConsoleQueueCountsNow(ctx, db.ConsoleQueueCountsNowParams{
		QueueIds: ids, ReadLimit: ConsoleCountedNow, Now: s.now()})
	if err != nil {
		return nil, "", fromDB("count queues", err)
	}
	for _, c := range counts {
		if !c.Complete {
			continue
		}
		g := &out[at[c.QueueID]]
		g.Available, g.Delayed, g.InFlight, g.CountedNow = &c.Available, &c.Delayed, &c.InFlight, true
		g.OldestAvailableAt = nil
		// min() over no rows is NULL, which sqlc can only type as any.
		if t, ok := c.OldestAvailableAt.(time.Time); ok {
			g.OldestAvailableAt = &t
		}
	}
	return out, next, nil
}

// DeadLetteredGauge is a queue's dead-lettered count from the gauge
// snapshot and when it was counted (ok false: not counted yet). Counting it
// at request time would read every dead-lettered message of the tenant.
func (s *Service) DeadLetteredGauge(ctx context.Context, tenant, queue string) (n int64, at time.Time, ok bool, err error) {
	q, err := s.queueByName(ctx, tenant, queue)
	if err != nil {
		return 0, time.Time{}, false, err
	}
	row, err := s.q.ConsoleQueueCounts(ctx, q.ID)
	if errors.Is(db.NotFound(err), db.ErrNotFound) {
		return 0, time.Time{}, false, nil
	}
	if err != nil {
		return 0, time.Time{}, false, fromDB("read queue counts", err)
	}
	return row.DeadLettered, row.CountedAt, true, nil
}

// DepthPoint is the depth of a queue (or a tenant's queues together) at one
// gauge snapshot.
type DepthPoint struct {
	At                                         time.Time
	Available, Delayed, InFlight, DeadLettered int64
}

// DepthHistoryKept is how long the depth history is kept, and
// DepthHistoryPeriod how often, cluster-wide, a snapshot is copied into it.
const (
	DepthHistoryKept   = 24 * time.Hour
	DepthHistoryPeriod = time.Minute
)

// DepthHistory is the depth at every recorded snapshot in the last span:
// of one queue, or with queue "" of all the tenant's queues together.
func (s *Service) DepthHistory(ctx context.Context, tenant, queue string, span time.Duration) ([]DepthPoint, error) {
	since := s.nowOr(time.Now()).Add(-span)
	var out []DepthPoint
	if queue == "" {
		rows, err := s.q.DepthHistoryTenant(ctx, db.DepthHistoryTenantParams{Tenant: tenant, Since: since})
		if err != nil {
			return nil, fromDB("read depth history", err)
		}
		for _, r := range rows {
			out = append(out, DepthPoint{At: r.At, Available: r.Available, Delayed: r.Delayed, InFlight: r.InFlight, DeadLettered: r.DeadLettered})
		}
		return out, nil
	}
	q, err := s.queueByName(ctx, tenant, queue)
	if err != nil {
		return nil, err
	}
	rows, err := s.q.DepthHistoryQueue(ctx, db.DepthHistoryQueueParams{QueueID: q.ID, Since: since})
	if err != nil {
		return nil, fromDB("read depth history", err)
	}
	for _, r := range rows {
		out = append(out, DepthPoint{At: r.At, Available: r.Available, Delayed: r.Delayed, InFlight: r.InFlight, DeadLettered: r.DeadLettered})
	}
	return out, nil
}
