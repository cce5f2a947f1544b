package service

import (
	"context"
	"time"

	"github.com/skipq/skipq/db"
)

// Maintenance statements for the worker. Each takes at most max rows with
// SKIP LOCKED, so any number of nodes may run them at once: they split the
// work instead of waiting on each other, and a batch holds few locks briefly.

// DeadLetterExpiredLeases moves up to max messages whose last allowed lease
// ran out to their dead-letter queues (or discards them). It returns how
// many it handled.
func (s *Service) DeadLetterExpiredLeases(ctx context.Context, max int) (int, error) {
	var n int
	var moves []db.MessageDeadLetterRow
	err := s.inTx(ctx, func(q *db.Queries) error {
		rows, err := q.MessageFinalLeaseExpired(ctx, db.MessageFinalLeaseExpiredParams{Now: s.now(), MaxMessages: int32(max)})
		if err != nil || len(rows) == 0 {
			return err
		}
		keys := make([]deadLetterKey, len(rows))
		for i, r := range rows {
			keys[i] = deadLetterKey{r.QueueID, r.Sequence, r.DeadLetterQueue}
		}
		n = len(rows)
		moves, err = s.deadLetter(ctx, q, keys)
		return err
	})
	if err != nil {
		return 0, fromDB("dead-letter expired leases", err)
	}
	for id, c := range deadLetterArrivals(moves) {
		s.hub.Publish(id, c)
	}
	s.observeMoves(moves)
	return n, nil
}

// RemoveExpired deletes up to max expired messages that are not in a live
// lease.
func (s *Service) RemoveExpired(ctx context.Context, max int) (int, error) {
	rows, err := s.q.MessageDeleteExpired(ctx, db.MessageDeleteExpiredParams{Now: s.now(), MaxMessages: int32(max)})
	if err != nil {
		return 0, fromDB("remove expired messages", err)
	}
	expired := map[int64]int{}
	for _, id := range rows {
		expired[id]++
	}
	s.observeByID(ctx, expired, s.obs.MessagesExpired)
	return len(rows), nil
}

// DropOldDedupKeys deletes up to max idempotency keys whose window passed and
// whose message left the queue.
func (s *Service) DropOldDedupKeys(ctx context.Context, max int) (int, error) {
	n, err := s.q.DedupKeyDeleteExpired(ctx, db.DedupKeyDeleteExpiredParams{Now: s.now(), MaxKeys: int32(max)})
	return int(n), fromDB("drop old dedup keys", err)
}

// maxGaugeQueues bounds the queues the gauges cover (the largest ones).
const maxGaugeQueues = 1000

// RefreshQueueCounts reads every queue's counts and hands them to the
// observer (the metrics gauges). It returns 0: it is not a batch job.
func (s *Service) RefreshQueueCounts(ctx context.Context, _ int) (int, error) {
	rows, err := s.q.QueueCounts(ctx, db.QueueCountsParams{Now: s.now(), MaxQueues: maxGaugeQueues})
	if err != nil {
		return 0, fromDB("count queues", err)
	}
	counts := make([]QueueCount, len(rows))
	for i, r := range rows {
		counts[i] = QueueCount{Tenant: r.Tenant, Queue: r.Name, Available: r.Available, Delayed: r.Delayed, InFlight: r.InFlight}
		// min() over no rows is NULL, which sqlc can only type as any.
		if t, ok := r.OldestAvailableAt.(time.Time); ok {
			counts[i].OldestAvailableAt = &t
		}
	}
	s.obs.QueueCounts(counts, s.nowOr(time.Now()))
	return 0, nil
}
