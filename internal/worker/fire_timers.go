package worker

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/service"
)

// FireTimers acts on due timers: a message whose delay or (non-final)
// lease ended is readied and its queue's waiting receivers are woken; a
// last allowed delivery whose lease ran out is moved to its dead-letter
// queue (or discarded). Timers of messages settled meanwhile are dropped.
type FireTimers struct {
	Config
	deps
	probe timerProbe
}

// NewFireTimers builds the job: every 500 ms, BatchSize timers and timer
// sets of about BatchSize messages a run.
func NewFireTimers(pool *pgxpool.Pool, svc *service.Service) *FireTimers {
	return &FireTimers{Config: batchConfig(500 * time.Millisecond), deps: newDeps(pool, svc)}
}

// RunOnce acts on the messages of up to BatchSize due single timers and of
// due timer sets holding BatchSize messages or a set's more (TimerTakeDue),
// and returns how many messages it took: at least BatchSize when either
// kind filled its batch, so that the worker runs it again at once. The
// wake-ups of readied messages are only published after the commit, when
// a woken receiver can claim them.
func (j *FireTimers) RunOnce(ctx context.Context) (int, error) {
	if !j.probe.due() {
		return 0, nil
	}
	// One cheap probe of the timers index first: an idle database sees a
	// single statement, at most once a second, not a transaction per tick.
	wait, err := j.q.TimerWait(ctx, db.TimerWaitParams{Now: j.now(), CapSeconds: timerHorizon.Seconds()})
	if err != nil {
		return 0, failed("fire timers", err)
	}
	if wait > 0 {
		if j.now() == nil { // the real clock: see timerProbe
			j.probe.wait(time.Duration(wait * float64(time.Second)))
		}
		return 0, nil
	}
	var taken int
	readied := map[int64]int{}
	var moves []db.MessageDeadLetterRow
	err = j.inTx(ctx, func(q *db.Queries) error {
		timers, err := q.TimerTakeDue(ctx, db.TimerTakeDueParams{Now: j.now(), MaxTimers: int32(j.BatchSize)})
		if err != nil || len(timers) == 0 {
			return err
		}
		taken = len(timers)
		fire := db.MessageFireParams{Now: j.now(), RetrySeconds: int32(timerHorizon / time.Second)}
		for _, t := range timers {
			fire.QueueIds = append(fire.QueueIds, t.QueueID)
			fire.Sequences = append(fire.Sequences, t.Sequence)
		}
		fired, err := q.MessageFire(ctx, fire)
		if err != nil {
			return err
		}
		var exhaustedIDs, exhaustedSeqs []int64
		for _, f := range fired {
			if f.Exhausted {
				exhaustedIDs = append(exhaustedIDs, f.QueueID)
				exhaustedSeqs = append(exhaustedSeqs, f.Sequence)
				continue
			}
			readied[f.QueueID]++
		}
		moves, err = j.deadLetter(ctx, q, exhaustedIDs, exhaustedSeqs)
		return err
	})
	if err != nil {
		return 0, failed("fire timers", err)
	}
	hub := j.svc.Hub()
	for id, n := range readied {
		hub.Publish(id, n)
	}
	for id, n := range deadLetterArrivals(moves) {
		hub.Publish(id, n)
	}
	for id := range deadLetterSources(moves) {
		// A FIFO group whose first message left may take its next one.
		hub.Publish(id, 1)
	}
	j.svc.ObserveDeadLetters(moves)
	return taken, nil
}

// timerHorizon is how far ahead a timer can be when it is filed: never
// sooner than a second after the now() of the transaction that files it (a
// delay or a lease is a whole number of seconds, at least 1).
const timerHorizon = time.Second

// timerProbe spares the worker the probe of the timers when none can be due
// yet: after a probe found the earliest timer d away (or none), nothing
// can be due before min(d, timerHorizon) -- a timer filed since is at least
// timerHorizon out. The worker still ticks every 500 ms and fires a timer
// as soon as it is due, at worst late by how much earlier than its commit
// the filing transaction started (a long SQL transaction's delayed send),
// and then by at most timerHorizon. Used only with the real clock: an
// injected one can jump.
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

// deadLetter moves the given (locked) messages to their dead-letter queues,
// creating missing ones, or discards those without one
// (skipq.message_dead_letter), inside the batch's transaction. It returns
// one row per message moved or discarded.
func (j *FireTimers) deadLetter(ctx context.Context, q *db.Queries, queueIDs, sequences []int64) ([]db.MessageDeadLetterRow, error) {
	if len(queueIDs) == 0 {
		return nil, nil
	}
	return q.MessageDeadLetter(ctx, db.MessageDeadLetterParams{
		Now: j.now(), QueueIds: queueIDs, Sequences: sequences,
		ServerMaxReceiveCount: int32(j.svc.Limits().MaxReceiveCount)})
}

// deadLetterArrivals counts the messages each dead-letter queue received.
func deadLetterArrivals(moves []db.MessageDeadLetterRow) map[int64]int {
	received := map[int64]int{}
	for _, r := range moves {
		if r.DeadLetterQueueID != nil {
			received[*r.DeadLetterQueueID]++
		}
	}
	return received
}

// deadLetterSources are the queues messages were dead-lettered from.
func deadLetterSources(moves []db.MessageDeadLetterRow) map[int64]bool {
	sources := map[int64]bool{}
	for _, r := range moves {
		sources[r.SourceQueueID] = true
	}
	return sources
}
