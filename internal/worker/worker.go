// Package worker runs skipq's periodic jobs in every node: firing timers
// (delays and leases that ended, dead-lettering last deliveries), removing
// expired messages and the messages of deleted queues, dropping old
// idempotency keys, the gauges and the vacuum. Every batch job is a bounded
// SKIP LOCKED statement, so many nodes may run the worker at once without
// double work. In the style of River's internal/maintenance: each job is a
// small value with its period, a per-run timeout and a randomized start.
package worker

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/sqs/sqsstate"
)

// BatchSize bounds every statement the worker runs.
const BatchSize = 1000

// job is one periodic duty.
type job struct {
	name  string
	every time.Duration
	// timeout bounds one run, so that a run stuck on an unreachable or
	// overloaded database ends and the next tick tries again.
	timeout time.Duration
	// run does one run; more reports that it filled its batch, and the
	// job runs again at once.
	run func(ctx context.Context) (more bool, err error)
}

// batch is a job that moves up to BatchSize rows per run.
func batch(name string, every time.Duration, run func(context.Context, int) (int, error)) job {
	return job{name: name, every: every, timeout: 10 * time.Second, run: func(ctx context.Context) (bool, error) {
		n, err := run(ctx, BatchSize)
		return n == BatchSize, err
	}}
}

// once is a job that is not a batch: one run per tick.
func once(name string, every, timeout time.Duration, run func(context.Context) error) job {
	return job{name: name, every: every, timeout: timeout, run: func(ctx context.Context) (bool, error) {
		return false, run(ctx)
	}}
}

// Worker runs the jobs until its context ends.
type Worker struct {
	jobs []job
	log  *slog.Logger
}

// Options configure the worker.
type Options struct {
	// Vacuum lets the worker vacuum the messages table between
	// autovacuum's rounds (service.VacuumMessages).
	Vacuum bool
	// SQS is the node's SQS state, whose move tasks the worker takes over
	// when the node running them stopped.
	SQS *sqsstate.State
}

// New builds the worker for a service. The intervals keep SPEC §3's promises
// (dead-lettered within 2 s of a lease expiry, expired messages removed
// within 5 s) at about three statements per second on an idle database:
// the timers are probed at most once a second while none is due
// (service.FireTimers), expired messages every 4 s.
func New(svc *service.Service, log *slog.Logger, opts Options) *Worker {
	jobs := []job{
		batch("fire timers (delays and leases that ended)", 500*time.Millisecond, svc.FireTimers),
		batch("remove expired messages", 4*time.Second, svc.RemoveExpired),
		batch("drop old dedup keys", 30*time.Second, svc.DropOldDedupKeys),
		batch("remove messages of deleted queues", 30*time.Second, svc.RemoveOrphaned),
		batch("prune empty FIFO groups", 10*time.Second, svc.PruneGroups),
		batch("prune the history of messages gone a day ago", 60*time.Second, svc.PruneHistory),
		batch("take over SQS move tasks whose node stopped", 15*time.Second, opts.SQS.TakeOverMoveTasks),
		once("refresh queue gauges", 5*time.Second, 30*time.Second, svc.RefreshQueueCounts),
		once("remove stale ready rows", 10*time.Second, 60*time.Second, svc.RemoveStaleReady),
		once("record depth history", 20*time.Second, 30*time.Second, func(ctx context.Context) error {
			return svc.RecordDepthHistory(ctx, BatchSize)
		}),
	}
	if opts.Vacuum {
		jobs = append(jobs, once("vacuum messages", service.VacuumPeriod, 2*time.Minute, svc.VacuumMessages))
	}
	return &Worker{log: log, jobs: jobs}
}

// Run starts every job and returns when ctx ends, between runs.
func (w *Worker) Run(ctx context.Context) {
	done := make(chan struct{})
	for _, j := range w.jobs {
		go func() {
			defer func() { done <- struct{}{} }()
			w.loop(ctx, j)
		}()
	}
	for range w.jobs {
		<-done
	}
}

// loop runs a job every period, starting after a random part of the first
// one: nodes started together (a deployment) do not run their jobs in
// lockstep.
func (w *Worker) loop(ctx context.Context, j job) {
	start := time.NewTimer(rand.N(j.every))
	select {
	case <-ctx.Done():
		start.Stop()
		return
	case <-start.C:
	}
	ticker := time.NewTicker(j.every)
	defer ticker.Stop()
	for {
		for ctx.Err() == nil {
			runCtx, cancel := context.WithTimeout(ctx, j.timeout)
			more, err := j.run(runCtx)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					w.log.Warn("worker job failed", "job", j.name, "error", err)
				}
				break
			}
			if !more {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
