// Package worker runs skipq's periodic jobs in every node: dead-lettering
// last deliveries whose lease ran out, removing expired messages and
// dropping old idempotency keys. Every job is a bounded SKIP LOCKED batch,
// so many nodes may run the worker at once without double work.
package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/skipq/skipq/service"
)

// BatchSize bounds every statement the worker runs.
const BatchSize = 1000

// job is one periodic duty. A job that fills its batch runs again at once.
type job struct {
	name  string
	every time.Duration
	run   func(ctx context.Context, max int) (int, error)
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
}

// New builds the worker for a service. The intervals keep SPEC §3's promises
// (dead-lettered within 2 s of a lease expiry, expired messages removed
// within 5 s) at about three statements per second on an idle database:
// the timers are probed at most once a second while none is due
// (service.FireTimers), expired messages every 4 s.
func New(svc *service.Service, log *slog.Logger, opts Options) *Worker {
	jobs := []job{
		{"fire timers (delays and leases that ended)", 500 * time.Millisecond, svc.FireTimers},
		{"remove expired messages", 4 * time.Second, svc.RemoveExpired},
		{"drop old dedup keys", 30 * time.Second, svc.DropOldDedupKeys},
		{"remove messages of deleted queues", 30 * time.Second, svc.RemoveOrphaned},
		{"refresh queue gauges", 5 * time.Second, svc.RefreshQueueCounts},
	}
	if opts.Vacuum {
		jobs = append(jobs, job{"vacuum messages", service.VacuumPeriod, svc.VacuumMessages})
	}
	return &Worker{log: log, jobs: jobs}
}

// Run starts every job and returns when ctx ends, between batches.
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

func (w *Worker) loop(ctx context.Context, j job) {
	ticker := time.NewTicker(j.every)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		for ctx.Err() == nil {
			n, err := j.run(ctx, BatchSize)
			if err != nil {
				if ctx.Err() == nil {
					w.log.Warn("worker job failed", "job", j.name, "error", err)
				}
				break
			}
			if n < BatchSize {
				break
			}
		}
	}
}
