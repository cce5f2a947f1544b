// Package worker runs skipq's periodic jobs in every node: firing timers
// (delays and leases that ended, dead-lettering last deliveries), removing
// expired messages and the messages of deleted queues, dropping old
// idempotency keys, the gauges and the vacuum. Every batch job is a bounded
// SKIP LOCKED statement, so many nodes may run the worker at once without
// double work. In the style of River's internal/maintenance: each job is a
// type of its own (one file each) with its Config, built by its New
// function and run once by its RunOnce; the Worker runs them all, each
// every period from a randomized start.
//
// The jobs run their own statements (internal/db); they tell the service
// only what it must know: wake-ups of waiting receivers through its hub,
// and metrics through its Observe methods.
package worker

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/sqs/sqsstate"
)

// BatchSize bounds every statement the worker runs.
const BatchSize = 1000

// Config is a job's schedule and bounds.
type Config struct {
	// Period is how often the job runs.
	Period time.Duration
	// Timeout bounds one run, so that a run stuck on an unreachable or
	// overloaded database ends and the next tick tries again.
	Timeout time.Duration
	// BatchSize bounds the rows one statement of the job takes. A batch
	// job whose run filled it runs again at once.
	BatchSize int
}

// batchConfig is the Config of a job that moves up to BatchSize rows per
// run.
func batchConfig(period time.Duration) Config {
	return Config{Period: period, Timeout: 10 * time.Second, BatchSize: BatchSize}
}

// deps is what every job works with: the database, and the service it
// tells what it must know.
type deps struct {
	pool *pgxpool.Pool
	q    *db.Queries // each statement run as package db decides (db.Open)
	svc  *service.Service
}

func newDeps(pool *pgxpool.Pool, svc *service.Service) deps {
	return deps{pool: pool, q: db.Open(pool), svc: svc}
}

// now is the time of the service's rules: nil for the database's now().
func (d deps) now() *time.Time { return d.svc.Now() }

func (d deps) nowOr(t time.Time) time.Time {
	if n := d.now(); n != nil {
		return *n
	}
	return t
}

// inTx runs fn in one transaction (again, should it meet a transaction
// pooler's prepared-statement error: db.RetryPooled).
func (d deps) inTx(ctx context.Context, fn func(q *db.Queries) error) error {
	return db.RetryPooled(func() error {
		return pgx.BeginTxFunc(ctx, d.pool, db.TxOptions, func(tx pgx.Tx) error {
			return fn(d.q.WithTx(tx))
		})
	})
}

// failed names the step of a job that failed (nil: none did).
func failed(step string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s failed: %w", step, err)
}

// job is one periodic duty, as the Worker runs it.
type job struct {
	name   string
	config Config
	// run does one run; more reports that it filled its batch, and the
	// job runs again at once.
	run func(ctx context.Context) (more bool, err error)
}

// batch is a job that moves up to config.BatchSize rows per run (the
// timer job a few more: it takes timer sets whole).
func batch(name string, config Config, run func(context.Context) (int, error)) job {
	return job{name: name, config: config, run: func(ctx context.Context) (bool, error) {
		n, err := run(ctx)
		return n >= config.BatchSize, err
	}}
}

// once is a job that is not a batch: one run per tick.
func once(name string, config Config, run func(context.Context) error) job {
	return job{name: name, config: config, run: func(ctx context.Context) (bool, error) {
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
	// autovacuum's rounds (VacuumMessages), and the ready table as soon as
	// claims left dead rows in it (VacuumReady).
	Vacuum bool
	// SQS is the node's SQS state, whose move tasks the worker takes over
	// when the node running them stopped.
	SQS *sqsstate.State
}

// New builds the worker of a service on its pool. The intervals keep the
// promises of skipq's contract (dead-lettered within 2 s of a lease expiry,
// expired messages removed within 5 s) at about three statements per
// second on an idle database: the timers are probed at most once a second
// while none is due (FireTimers), expired messages every 4 s.
func New(pool *pgxpool.Pool, svc *service.Service, log *slog.Logger, opts Options) *Worker {
	fire := NewFireTimers(pool, svc)
	expired := NewRemoveExpired(pool, svc)
	dedup := NewDropOldDedupKeys(pool, svc)
	orphaned := NewRemoveOrphaned(pool, svc)
	groups := NewPruneGroups(pool, svc)
	history := NewPruneHistory(pool, svc)
	gauges := NewRefreshQueueCounts(pool, svc)
	stale := NewRemoveStaleReady(pool, svc)
	depth := NewRecordDepthHistory(pool, svc)
	topics := NewTopicUpkeep(pool, svc)
	copies := NewReadyTopicCopies(pool, svc)
	replays := NewReplayTopics(pool, svc)
	retention := NewPruneTopicRetention(pool, svc)
	jobs := []job{
		batch("fire timers (delays and leases that ended)", fire.Config, fire.RunOnce),
		batch("remove expired messages", expired.Config, expired.RunOnce),
		batch("drop old dedup keys", dedup.Config, dedup.RunOnce),
		batch("remove messages of deleted queues", orphaned.Config, orphaned.RunOnce),
		batch("prune empty FIFO groups", groups.Config, groups.RunOnce),
		batch("prune the history of messages gone a day ago", history.Config, history.RunOnce),
		batch("fold topic counts, remove unused published bodies", topics.Config, topics.RunOnce),
		// One run a period, not again at once while runs come back full:
		// a group with a backlog has its copies made by its claims, at a
		// claim's cost; the job makes at most BatchSize a period at a
		// publish's.
		once("make ready the topic copies no claim made", copies.Config, func(ctx context.Context) error {
			_, err := copies.RunOnce(ctx)
			return err
		}),
		batch("replay topics' retained messages to new subscriptions", replays.Config, replays.RunOnce),
		batch("remove topics' retained messages whose retention ended", retention.Config, retention.RunOnce),
		batch("take over SQS move tasks whose node stopped", batchConfig(15*time.Second), func(ctx context.Context) (int, error) {
			return opts.SQS.TakeOverMoveTasks(ctx, BatchSize)
		}),
		once("refresh queue gauges", gauges.Config, gauges.RunOnce),
		once("remove stale ready rows", stale.Config, stale.RunOnce),
		once("record depth history", depth.Config, depth.RunOnce),
	}
	if opts.Vacuum {
		vacuum := NewVacuumMessages(pool, svc)
		ready := NewVacuumReady(pool, svc)
		jobs = append(jobs, once("vacuum messages", vacuum.Config, vacuum.RunOnce),
			once("vacuum the ready table", ready.Config, ready.RunOnce))
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
	start := time.NewTimer(rand.N(j.config.Period))
	select {
	case <-ctx.Done():
		start.Stop()
		return
	case <-start.C:
	}
	ticker := time.NewTicker(j.config.Period)
	defer ticker.Stop()
	for {
		for ctx.Err() == nil {
			runCtx, cancel := context.WithTimeout(ctx, j.config.Timeout)
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
