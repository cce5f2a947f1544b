// Package bench measures skipq against SPEC §8: the full message lifecycle
// over HTTP next to the same lifecycle in plain SQL on the same database, wake
// latency, throughput behind a large backlog, what a receive costs behind
// delayed and in-flight messages, the cost of idle long-polls, and the node's
// memory. `skipq-bench` is its command line.
//
// By default it is self-contained: a private, durable PostgreSQL cluster under
// .skipq/bench (fsync and synchronous_commit on), a fresh database migrated for
// the run and dropped after it, and in-process nodes on 127.0.0.1. Options.URLs
// and Options.DatabaseURL point it at running nodes and an existing database.
package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/devpg"
	"github.com/skipq/skipq/internal/migrations"
)

// Scenario names, in the order they run. The two that fill large queues run
// last: heads removes its fills when the backlog runs after it, and the
// backlog leaves a large table behind.
const (
	Lifecycle   = "lifecycle"
	SQLConsumer = "sqlconsumer"
	Latency     = "latency"
	SQS         = "sqs"
	Idle        = "idle"
	Heads       = "heads"
	Backlog     = "backlog"
	FIFO        = "fifo"
	Search      = "search"
	Trace       = "trace"
	Locks       = "locks"
)

// Scenarios is every scenario, in run order.
// Idle runs first, on the fresh database: after the other scenarios the
// worker still fires the lease timers of their claims for a minute (most of
// them hints of messages already acked), which is work, not idleness.
// Trace runs before the scenarios that fill large queues, so its untraced
// figures compare with the lifecycle's. FIFO fills one group with a million
// messages. Search runs last: it adds
// a million messages of a tenant of its own, which it reads, never claims.
var Scenarios = []string{Idle, Lifecycle, SQLConsumer, Latency, SQS, Trace, Locks, Heads, Backlog, FIFO, Search}

// Point is one lifecycle measurement: messages per send/receive/ack call and
// producer/consumer pairs.
type Point struct {
	Batch int `json:"batch"`
	Pairs int `json:"pairs"`
}

// Default figures. A full default run is about 2.5 minutes on 2 cores: the
// 6-point lifecycle matrix runs HTTP and raw SQL for 1 s warm-up + 5 s each
// (~80 s with drains), the backlog preloads 1,000,000 rows and runs twice,
// the idle scenario holds 1,000 long-polls for 10 s. The heads scenario adds
// about 3 minutes while a claim walks past what sits ahead of it: fills of
// 1,000,000 delayed and 100,000 in-flight messages, then its cycles (see
// heads.go for its own figures).
const (
	DefaultDuration      = 5 * time.Second
	QuickDuration        = 3 * time.Second
	DefaultWarmup        = time.Second
	QuickWarmup          = 500 * time.Millisecond
	DefaultPreload       = 1_000_000
	QuickPreload         = 100_000
	DefaultSamples       = 1000
	QuickSamples         = 200
	DefaultIdleWaiters   = 1000
	DefaultIdleDuration  = 10 * time.Second
	QuickIdleDuration    = 3 * time.Second
	DefaultClusterDir    = ".skipq/bench"
	defaultMaxPerRequest = 1000 // SPEC §4: a batch send holds at most 1,000 messages
)

// DefaultMatrix is batch 1 and 100 by 1, 4 and 16 pairs; QuickMatrix keeps
// the 4-pair column.
var (
	DefaultMatrix = []Point{{1, 1}, {1, 4}, {1, 16}, {100, 1}, {100, 4}, {100, 16}}
	QuickMatrix   = []Point{{1, 4}, {100, 4}}
)

// Options configure a run. Zero values take the defaults above.
type Options struct {
	Scenarios []string      // a subset of Scenarios; empty = all
	Quick     bool          // CI smoke run: shorter runs, smaller preload and matrix
	Duration  time.Duration // each measured run
	Warmup    time.Duration // load before each measured run

	URLs        []string // running nodes to drive (needs DatabaseURL); empty = in-process nodes
	DatabaseURL string   // an existing, migrated database; empty = a fresh one on the private cluster
	Nodes       int      // in-process nodes (default 1); pairs and receivers spread over them
	APIKey      string   // Authorization: Bearer for URLs with auth on

	Matrix         []Point       // lifecycle points
	SQSMatrix      []Point       // sqs scenario points (default SQSMatrix)
	LatencySamples int           // wake-latency samples
	Preload        int           // backlog size
	IdleWaiters    int           // concurrent long-polls of the idle scenario
	IdleDuration   time.Duration // how long they are watched
	HeadsDelayed   int           // delayed messages ahead of the heads cycle
	HeadsInFlight  int           // in-flight messages ahead of the heads cycle
	HeadsSamples   int           // measured heads cycles per queue

	ClusterDir string    // the private cluster's home (default .skipq/bench)
	CPUProfile io.Writer // CPU profile of the HTTP window of the batch-1 lifecycle point with the most pairs (none: the first point)
	Progress   io.Writer // one line per step; nil = quiet
}

func (o Options) withDefaults() (Options, error) {
	pick := func(d *time.Duration, def, quick time.Duration) {
		if *d <= 0 {
			*d = def
			if o.Quick {
				*d = quick
			}
		}
	}
	pick(&o.Duration, DefaultDuration, QuickDuration)
	pick(&o.Warmup, DefaultWarmup, QuickWarmup)
	pick(&o.IdleDuration, DefaultIdleDuration, QuickIdleDuration)
	if o.Nodes <= 0 {
		o.Nodes = 1
	}
	if len(o.URLs) > 0 {
		o.Nodes = len(o.URLs)
	}
	if o.Matrix == nil {
		o.Matrix = DefaultMatrix
		if o.Quick {
			o.Matrix = QuickMatrix
		}
	}
	if o.SQSMatrix == nil {
		o.SQSMatrix = SQSMatrix
	}
	for _, p := range o.SQSMatrix {
		if p.Batch < 1 || p.Batch > 10 || p.Pairs < 1 {
			return o, fmt.Errorf("bench: bad sqs point %+v (SQS batches hold 1 to 10 messages)", p)
		}
	}
	for _, p := range o.Matrix {
		if p.Batch < 1 || p.Batch > defaultMaxPerRequest || p.Pairs < 1 {
			return o, fmt.Errorf("bench: bad lifecycle point %+v", p)
		}
	}
	if o.LatencySamples <= 0 {
		o.LatencySamples = DefaultSamples
		if o.Quick {
			o.LatencySamples = QuickSamples
		}
	}
	if o.Preload <= 0 {
		o.Preload = DefaultPreload
		if o.Quick {
			o.Preload = QuickPreload
		}
	}
	pickN := func(n *int, def, quick int) {
		if *n <= 0 {
			*n = def
			if o.Quick {
				*n = quick
			}
		}
	}
	pickN(&o.HeadsDelayed, DefaultHeadsDelayed, QuickHeadsDelayed)
	pickN(&o.HeadsInFlight, DefaultHeadsInFlight, QuickHeadsInFlight)
	pickN(&o.HeadsSamples, DefaultHeadsSamples, QuickHeadsSamples)
	if o.IdleWaiters <= 0 {
		o.IdleWaiters = DefaultIdleWaiters
	}
	if o.ClusterDir == "" {
		o.ClusterDir = DefaultClusterDir
	}
	if len(o.Scenarios) == 0 {
		o.Scenarios = Scenarios
	}
	for _, s := range o.Scenarios {
		if !slices.Contains(Scenarios, s) {
			return o, fmt.Errorf("bench: unknown scenario %q (want %s)", s, strings.Join(Scenarios, ", "))
		}
	}
	if len(o.URLs) > 0 && o.DatabaseURL == "" {
		return o, errors.New("bench: running nodes (URLs) need the database they use (DatabaseURL)")
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o, nil
}

func (o Options) runs(s string) bool { return slices.Contains(o.Scenarios, s) }

// Run runs the chosen scenarios and reports what they measured.
func Run(ctx context.Context, opts Options) (Report, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return Report{}, err
	}
	e, err := newEnv(ctx, o)
	if err != nil {
		return Report{}, err
	}
	defer e.close()

	rep := Report{Setup: e.setup(ctx)}
	rss := startRSSSampler()
	defer rss.stop()
	e.rss = rss

	for _, sc := range Scenarios {
		if !o.runs(sc) {
			continue
		}
		e.scenario = sc
		switch sc {
		case Lifecycle:
			rep.Lifecycle, err = e.lifecycle(ctx)
		case SQLConsumer:
			rep.SQLConsumer, err = e.sqlConsumer(ctx, rep.Lifecycle)
		case Latency:
			rep.Latency, err = e.latency(ctx)
		case SQS:
			rep.SQS, err = e.sqsScenario(ctx)
		case Idle:
			rep.Idle, err = e.idle(ctx)
		case Heads:
			rep.Heads, rep.HeadsEvidence, err = e.heads(ctx)
		case Backlog:
			rep.Backlog, err = e.backlog(ctx, rep.Lifecycle)
		case FIFO:
			rep.FIFO, err = e.fifo(ctx)
		case Search:
			rep.Search, err = e.search(ctx)
		case Trace:
			rep.Trace, err = e.trace(ctx)
		case Locks:
			rep.Locks, err = e.locks(ctx)
		}
		if err != nil {
			return rep, fmt.Errorf("%s: %w", sc, err)
		}
		// Other processes on the machine take CPU from the nodes and
		// Postgres alike: say so rather than report their noise as ours.
		if other := e.noise[sc]; other > busyMachine {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf(
				"%s: processes other than the bench and its PostgreSQL server used up to %.0f%% of the machine's CPU in a measured window (server workers that exit within the window, such as autovacuum, count there too); if that was other load, these figures are not reliable", sc, other))
		}
	}
	rep.RSSMBPeak, rep.RSSScope = rss.peak(o.runs(Lifecycle))
	rep.RSSMBHighWater = rss.highWater()
	if len(o.URLs) > 0 {
		rep.RSSScope = "the bench process only: the nodes run elsewhere"
	}
	rep.Targets = targets(rep)
	return rep, nil
}

// env is what every scenario shares: the database, a monitoring pool, the
// HTTP client.
type env struct {
	o       Options
	dbURL   string
	mon     *pgxpool.Pool // monitoring; its statements carry monitorMark and its backends monitorApp
	http    *client
	pgss    bool // pg_stat_statements answers
	super   bool
	rss     *rssSampler
	cleanup []func()

	scenario string             // the one running
	noise    map[string]float64 // per scenario: the largest CPU share of other processes in a measured window
}

// noteCPU records a measured window's CPU split for the busy-machine warning.
func (e *env) noteCPU(c CPUShare) {
	if e.noise == nil {
		e.noise = map[string]float64{}
	}
	e.noise[e.scenario] = max(e.noise[e.scenario], c.Other)
}

// busyMachine is the share of the machine's CPU (percent) that other
// processes may use during a scenario before the report warns.
const busyMachine = 10

const (
	monitorApp  = "skipq-bench-monitor"
	monitorMark = "/* skipq-bench monitor */ "
	rawApp      = "skipq-bench-raw"
	// sqlConsumerApp names the SQL consumer scenario's connections.
	sqlConsumerApp = "skipq-bench-sql"
	setupApp       = "skipq-bench-setup"
)

func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(e.o.Progress, "bench: "+format+"\n", args...)
}

func newEnv(ctx context.Context, o Options) (_ *env, err error) {
	e := &env{o: o, http: newClient(o.APIKey)}
	e.cleanup = append(e.cleanup, e.http.close)
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	e.dbURL = o.DatabaseURL
	if e.dbURL == "" {
		if e.dbURL, err = e.privateDatabase(ctx); err != nil {
			return nil, err
		}
	}
	if e.mon, err = newPool(ctx, e.dbURL, monitorApp, 4); err != nil {
		return nil, err
	}
	e.cleanup = append(e.cleanup, e.mon.Close)
	if err := e.mon.QueryRow(ctx, monitorMark+"SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&e.super); err != nil {
		return nil, fmt.Errorf("bench: database: %w", err)
	}
	// pg_stat_statements counts what reaches Postgres; it needs
	// shared_preload_libraries, which devpg sets when the server has it.
	_, _ = e.mon.Exec(ctx, monitorMark+"CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
	var n int
	e.pgss = e.mon.QueryRow(ctx, monitorMark+"SELECT count(*)::int FROM pg_stat_statements").Scan(&n) == nil
	return e, nil
}

// privateDatabase starts (or reuses) the private cluster and makes a fresh,
// migrated database on it; both are undone by close (the cluster only if
// this run started it).
func (e *env) privateDatabase(ctx context.Context) (string, error) {
	dir := e.o.ClusterDir
	_, statErr := os.Stat(filepath.Join(dir, "data", "postmaster.pid"))
	wasRunning := statErr == nil
	if _, err := devpg.EnsureBinaries(ctx, e.o.Progress); err != nil {
		return "", err
	}
	e.logf("starting the private PostgreSQL under %s (durable: fsync and synchronous_commit on)", dir)
	cluster, err := devpg.EnsureDaemon(ctx, devpg.Options{Dir: dir})
	if err != nil {
		return "", err
	}
	if !wasRunning {
		e.cleanup = append(e.cleanup, func() {
			e.logf("stopping the private PostgreSQL")
			if err := devpg.StopDaemon(dir); err != nil {
				e.logf("%v", err)
			}
		})
	}
	name := "bench_" + time.Now().UTC().Format("20060102_150405") + "_" + strings.ToLower(rand.Text()[:6])
	if err := cluster.CreateDatabase(ctx, name); err != nil {
		return "", err
	}
	admin := cluster.URL("postgres")
	e.cleanup = append(e.cleanup, func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			e.logf("drop database %s: %v", name, err)
			return
		}
		defer func() { _ = conn.Close(ctx) }()
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			e.logf("drop database %s: %v", name, err)
		}
	})
	url := cluster.URL(name)
	if err := migrations.Up(ctx, url); err != nil {
		return "", err
	}
	e.logf("database %s created and migrated", name)
	return url, nil
}

// close undoes newEnv, last step first.
func (e *env) close() {
	for i := len(e.cleanup) - 1; i >= 0; i-- {
		e.cleanup[i]()
	}
	e.cleanup = nil
}

// newPool opens a pool whose backends carry app as application_name.
func newPool(ctx context.Context, url, app string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("bench: database URL: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	cfg.MaxConns = maxConns
	cfg.MinConns = 0
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return pool, nil
}

// setup records the server and settings the figures depend on.
func (e *env) setup(ctx context.Context) Setup {
	s := Setup{
		Nodes: e.o.Nodes, External: len(e.o.URLs) > 0, DurationS: e.o.Duration.Seconds(),
		WarmupS: e.o.Warmup.Seconds(), Quick: e.o.Quick, CPUs: cpus(), PgStatStatements: e.pgss,
		Settings: map[string]string{},
	}
	_ = e.mon.QueryRow(ctx, monitorMark+"SELECT current_setting('server_version')").Scan(&s.Postgres)
	for _, name := range []string{"fsync", "synchronous_commit", "wal_sync_method", "shared_buffers", "max_wal_size", "checkpoint_timeout", "max_connections"} {
		var v string
		if e.mon.QueryRow(ctx, monitorMark+"SELECT current_setting($1)", name).Scan(&v) == nil {
			s.Settings[name] = v
		}
	}
	return s
}

// checkpoint starts each measured run from the same state: no dead tuples
// left by earlier runs (VACUUM of skipq's and the raw baseline's tables; the
// statistics stay as they are) and nothing left to write from them
// (CHECKPOINT, superusers only). The raw table may not exist yet: its VACUUM
// then fails alone.
func (e *env) checkpoint(ctx context.Context) {
	_, _ = e.mon.Exec(ctx, monitorMark+"VACUUM skipq.messages, skipq.ready, skipq.timers")
	_, _ = e.mon.Exec(ctx, monitorMark+"VACUUM skipq_bench.raw_messages")
	if e.super {
		_, _ = e.mon.Exec(ctx, monitorMark+"CHECKPOINT")
	}
}

// queueName is a fresh queue name for one run.
func queueName(kind string) string {
	return "bench." + kind + "." + strings.ToLower(rand.Text()[:8])
}
