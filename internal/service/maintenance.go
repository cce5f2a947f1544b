package service

import (
	"context"
	"sync"
	"time"

	"github.com/skipq/skipq/internal/db"
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
	if !s.timerProbe.due() {
		return 0, nil
	}
	// One cheap probe of the timers index first: an idle database sees a
	// single statement, at most once a second, not a transaction per tick.
	wait, err := s.direct.TimerWait(ctx, db.TimerWaitParams{Now: s.now(), CapSeconds: timerHorizon.Seconds()})
	if err != nil {
		return 0, fromDB("fire timers", err)
	}
	if wait > 0 {
		if s.now() == nil { // the real clock: see timerProbe
			s.timerProbe.wait(time.Duration(wait * float64(time.Second)))
		}
		return 0, nil
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
		if err != nil {
			return err
		}
		if err := s.refileTimers(ctx, q, timers, fired); err != nil {
			return err
		}
		var exhaustedIDs, exhaustedSeqs []int64
		ready := db.MessageReadyParams{Now: s.now()}
		for _, f := range fired {
			if f.Exhausted {
				exhaustedIDs = append(exhaustedIDs, f.QueueID)
				exhaustedSeqs = append(exhaustedSeqs, f.Sequence)
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
		moves, err = s.deadLetter(ctx, q, exhaustedIDs, exhaustedSeqs)
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
	for id := range deadLetterSources(moves) {
		// A FIFO group whose first message left may take its next one.
		s.hub.Publish(id, 1)
	}
	s.observeMoves(moves)
	return taken, nil
}

// PruneGroups deletes up to max rows of FIFO groups left without messages
// (skipq.group_prune): those a settle could not prune, and those of purged
// queues, expired messages and deleted queues. Each call looks at the next
// groupPruneWindow groups of a walk over them all, which wraps around at
// the end; it returns max when the window had more empty groups than that.
func (s *Service) PruneGroups(ctx context.Context, max int) (int, error) {
	c := &s.groupPrune
	c.mu.Lock()
	defer c.mu.Unlock()
	r, err := s.q.GroupPrune(ctx, db.GroupPruneParams{MaxGroups: int32(max), ScanGroups: groupPruneWindow,
		AfterQueueID: c.queueID, AfterGroupID: c.groupID})
	if err != nil {
		return 0, fromDB("prune empty groups", err)
	}
	c.queueID, c.groupID = r.NextQueueID, r.NextGroupID
	return int(r.Pruned), nil
}

// groupPruneCursor is where this node's walk over the groups stands (nil:
// at the start). Nodes walk on their own; any of them prunes what it finds.
type groupPruneCursor struct {
	mu      sync.Mutex
	queueID *int64
	groupID *string
}

// groupPruneWindow is how many groups one PruneGroups call looks at: one
// probe of the messages each.
const groupPruneWindow = 10_000

// timerHorizon is how far ahead a timer can be when it is filed: never
// sooner than a second after the now() of the transaction that files it (a
// delay or a lease is a whole number of seconds, at least 1).
const timerHorizon = time.Second

// timerProbe spares the worker the probe of the timers when none can be due
// yet: after a probe found the earliest timer d away (or none), nothing
// can be due before min(d, timerHorizon) -- a timer filed since is at least
// timerHorizon out. The worker still ticks every 500 ms (SPEC §7) and fires
// a timer as soon as it is due, at worst late by how much earlier than its
// commit the filing transaction started (a long SQL transaction's delayed
// send), and then by at most timerHorizon. Used only with the real clock:
// an injected one can jump.
type timerProbe struct {
	mu        sync.Mutex
	notBefore time.Time
}

func (p *timerProbe) due() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !time.Now().Before(p.notBefore)
}

func (p *timerProbe) wait(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notBefore = time.Now().Add(min(d, timerHorizon))
}

// refileTimers files again the timers of messages that MessageLockDue
// passed over (another transaction holds them), TimerRefile keeping only
// those still waiting; the locked rest is handled now.
func (s *Service) refileTimers(ctx context.Context, q *db.Queries, taken []db.TimerTakeDueRow, fired []db.MessageLockDueRow) error {
	type key struct{ queueID, sequence int64 }
	locked := make(map[key]bool, len(fired))
	for _, f := range fired {
		locked[key{f.QueueID, f.Sequence}] = true
	}
	var again db.TimerRefileParams
	for _, t := range taken {
		if k := (key{t.QueueID, t.Sequence}); !locked[k] {
			locked[k] = true // a message with two timers is filed once
			again.QueueIds = append(again.QueueIds, t.QueueID)
			again.Sequences = append(again.Sequences, t.Sequence)
		}
	}
	if len(again.QueueIds) == 0 {
		return nil
	}
	again.Now, again.RetrySeconds = s.now(), int32(timerHorizon/time.Second)
	return q.TimerRefile(ctx, again)
}

// RemoveExpired deletes up to max expired messages that are not in a live
// lease, and retained messages whose retention ended (counted as no
// expiry).
func (s *Service) RemoveExpired(ctx context.Context, max int) (int, error) {
	rows, err := s.q.MessageDeleteExpired(ctx, db.MessageDeleteExpiredParams{Now: s.now(), MaxMessages: int32(max)})
	if err != nil {
		return 0, fromDB("remove expired messages", err)
	}
	expired := map[int64]int{}
	for _, r := range rows {
		if !r.Retained {
			expired[r.QueueID]++
		}
	}
	s.observeByID(ctx, expired, s.obs.MessagesExpired)
	return len(rows), nil
}

// RemoveStaleReady removes the ready rows left behind by a settle that
// raced the worker readying its message (see ReadyStaleRemove), looking at
// the first readyHeadRows of each queue.
func (s *Service) RemoveStaleReady(ctx context.Context) error {
	_, err := s.q.ReadyStaleRemove(ctx, readyHeadRows)
	return fromDB("remove stale ready rows", err)
}

// readyHeadRows is how many ready rows of each queue RemoveStaleReady
// checks: a stale row matters once claims reach it, at the head.
const readyHeadRows = 16

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
// the count.
func (s *Service) RefreshQueueCounts(ctx context.Context) error {
	turn, err := s.direct.JobTakeTurn(ctx, db.JobTakeTurnParams{Now: s.now(), Job: "queue_counts",
		PeriodSeconds: int32(QueueCountsPeriod / time.Second)})
	if err != nil {
		return fromDB("count queues", err)
	}
	if turn {
		err := s.inTx(ctx, func(q *db.Queries) error {
			if err := q.PlanAllowScans(ctx); err != nil {
				return err
			}
			if err := q.QueueCountsClear(ctx); err != nil {
				return err
			}
			return q.QueueCountsRefresh(ctx, s.now())
		})
		if err != nil {
			return fromDB("count queues", err)
		}
	}
	rows, err := s.direct.QueueCountsList(ctx, maxGaugeQueues)
	if err != nil {
		return fromDB("read queue counts", err)
	}
	counts := make([]QueueCount, len(rows))
	for i, r := range rows {
		counts[i] = QueueCount{Tenant: r.Tenant, Queue: r.Name, Available: r.Available, Delayed: r.Delayed,
			InFlight: r.InFlight, OldestAvailableAt: r.OldestAvailableAt}
	}
	s.obs.QueueCounts(counts, s.nowOr(time.Now()))
	return nil
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
// gone.
func (s *Service) VacuumMessages(ctx context.Context) error {
	turn, err := s.direct.JobTakeTurn(ctx, db.JobTakeTurnParams{Now: s.now(), Job: "vacuum",
		PeriodSeconds: int32(VacuumPeriod / time.Second)})
	if err != nil || !turn {
		return fromDB("vacuum", err)
	}
	dead, err := s.direct.MessageDeadTuples(ctx)
	if err != nil || dead < VacuumDeadTuples {
		return fromDB("vacuum", err)
	}
	return fromDB("vacuum", s.direct.MessageVacuum(ctx))
}
