package service

import (
	"context"
	"time"

	"github.com/skipq/skipq/db"
)

// Maintenance statements for the worker. Each takes at most max rows with
// SKIP LOCKED, so any number of nodes may run them at once: they split the
// work instead of waiting on each other, and a batch holds few locks briefly.

// FireTimers acts on up to max due timers: a message whose delay or
// (non-final) lease ended is readied and its queue's waiting receivers are
// woken; a last allowed delivery whose lease ran out is moved to its
// dead-letter queue (or discarded). Timers of messages settled meanwhile are
// dropped. It returns how many timers it took, so the worker runs it again
// at once while it fills batches. The readied counts are only published
// after the commit, when a woken receiver can claim the messages.
func (s *Service) FireTimers(ctx context.Context, max int) (int, error) {
	// One cheap probe of the timers index first: an idle database sees a
	// single statement per tick, not a transaction.
	due, err := s.q.TimerDue(ctx, s.now())
	if err != nil || !due {
		return 0, fromDB("fire timers", err)
	}
	var taken int
	readied := map[int64]int{}
	var moves []db.MessageDeadLetterRow
	err = s.inTx(ctx, func(q *db.Queries) error {
		timers, err := q.TimerTakeDue(ctx, db.TimerTakeDueParams{Now: s.now(), MaxTimers: int32(max)})
		if err != nil || len(timers) == 0 {
			return err
		}
		taken = len(timers)
		var lock db.MessageLockDueParams
		for _, t := range timers {
			lock.QueueIds = append(lock.QueueIds, t.QueueID)
			lock.Sequences = append(lock.Sequences, t.Sequence)
		}
		lock.Now = s.now()
		fired, err := q.MessageLockDue(ctx, lock)
		if err != nil || len(fired) == 0 {
			return err
		}
		var keys []deadLetterKey
		var ready db.MessageReadyParams
		for _, f := range fired {
			if f.Exhausted {
				keys = append(keys, deadLetterKey{f.QueueID, f.Sequence, f.DeadLetterQueue})
				continue
			}
			ready.QueueIds = append(ready.QueueIds, f.QueueID)
			ready.Sequences = append(ready.Sequences, f.Sequence)
		}
		if len(ready.QueueIds) > 0 {
			ids, err := q.MessageReady(ctx, ready)
			if err != nil {
				return err
			}
			for _, id := range ids {
				readied[id]++
			}
		}
		moves, err = s.deadLetter(ctx, q, keys)
		return err
	})
	if err != nil {
		return 0, fromDB("fire timers", err)
	}
	for id, n := range readied {
		s.hub.Publish(id, n)
	}
	for id, n := range deadLetterArrivals(moves) {
		s.hub.Publish(id, n)
	}
	s.observeMoves(moves)
	return taken, nil
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

// RemoveOrphaned deletes up to max messages whose queue was deleted while a
// send or a move into it was running (see MessageDeleteOrphaned). They are
// unreachable already; this frees their space.
func (s *Service) RemoveOrphaned(ctx context.Context, max int) (int, error) {
	rows, err := s.q.MessageDeleteOrphaned(ctx, int32(max))
	return len(rows), fromDB("remove messages of deleted queues", err)
}

// DropOldDedupKeys deletes up to max idempotency keys whose window passed and
// whose message left the queue.
func (s *Service) DropOldDedupKeys(ctx context.Context, max int) (int, error) {
	n, err := s.q.DedupKeyDeleteExpired(ctx, db.DedupKeyDeleteExpiredParams{Now: s.now(), MaxKeys: int32(max)})
	return int(n), fromDB("drop old dedup keys", err)
}

// maxGaugeQueues bounds the queues the gauges cover (the largest ones).
const maxGaugeQueues = 1000

// QueueCountsPeriod is how often, cluster-wide, the gauge snapshot is
// recounted from the messages table.
const QueueCountsPeriod = 15 * time.Second

// RefreshQueueCounts recounts the gauge snapshot if it is this node's turn,
// then hands the snapshot to the observer (the metrics gauges). Every node
// exports the same snapshot; only one node per QueueCountsPeriod pays for
// the count. It returns 0: it is not a batch job.
func (s *Service) RefreshQueueCounts(ctx context.Context, _ int) (int, error) {
	turn, err := s.q.JobTakeTurn(ctx, db.JobTakeTurnParams{Now: s.now(), Job: "queue_counts",
		PeriodSeconds: int32(QueueCountsPeriod / time.Second)})
	if err != nil {
		return 0, fromDB("count queues", err)
	}
	if turn {
		err := s.inTx(ctx, func(q *db.Queries) error {
			if err := q.PlanAllowScans(ctx); err != nil {
				return err
			}
			return q.QueueCountsRefresh(ctx, s.now())
		})
		if err != nil {
			return 0, fromDB("count queues", err)
		}
	}
	rows, err := s.q.QueueCountsList(ctx, maxGaugeQueues)
	if err != nil {
		return 0, fromDB("read queue counts", err)
	}
	counts := make([]QueueCount, len(rows))
	for i, r := range rows {
		counts[i] = QueueCount{Tenant: r.Tenant, Queue: r.Name, Available: r.Available, Delayed: r.Delayed,
			InFlight: r.InFlight, OldestAvailableAt: r.OldestAvailableAt}
	}
	s.obs.QueueCounts(counts, s.nowOr(time.Now()))
	return 0, nil
}

// VacuumPeriod is how often, cluster-wide, the worker considers vacuuming
// the messages table, and VacuumDeadTuples how many dead row versions make
// it worth it.
const (
	VacuumPeriod     = 3 * time.Second
	VacuumDeadTuples = 5000
)

// VacuumMessages vacuums the messages table when it is this node's turn and
// enough dead row versions piled up. Autovacuum naps for a minute between
// rounds; a busy queue table collects hundreds of thousands of dead versions
// in that time, and claims step over their index entries until they are
// gone. It returns 0: it is not a batch job.
func (s *Service) VacuumMessages(ctx context.Context, _ int) (int, error) {
	turn, err := s.q.JobTakeTurn(ctx, db.JobTakeTurnParams{Now: s.now(), Job: "vacuum",
		PeriodSeconds: int32(VacuumPeriod / time.Second)})
	if err != nil || !turn {
		return 0, fromDB("vacuum", err)
	}
	dead, err := s.q.MessageDeadTuples(ctx)
	if err != nil || dead < VacuumDeadTuples {
		return 0, fromDB("vacuum", err)
	}
	return 0, fromDB("vacuum", s.direct.MessageVacuum(ctx))
}
