package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/devpg"
	"github.com/skipq/skipq/internal/migrations"
)

// env is what every scenario shares: the database, a monitoring pool, the
// HTTP client.
type env struct {
	o       Options
	dbURL   string
	mon     *pgxpool.Pool // monitoring; its statements carry monitorMark and its backends monitorApp
	http    *client
	pgss    bool   // pg_stat_statements answers
	pgmqSQL []byte // pgmq's install file (Options.PgmqSQL), nil without one
	super   bool
	rss     *rssSampler
	cleanup []func()

	// nodeProcs are the running nodes' processes when a scenario runs its
	// nodes in processes of their own (startNodeProcesses), else nil.
	nodeProcs []*nodeProcess

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

// The application_name of the harness's own connections, so that
// pg_stat_activity tells them from the nodes' (the wait samples and the idle
// scenario's connection counts leave the monitor's out).
const (
	monitorApp  = "skipq-bench-monitor"
	monitorMark = "/* skipq-bench monitor */ "
	setupApp    = "skipq-bench-setup"
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
	if o.PgmqSQL != "" {
		// Read before anything runs: a wrong path fails the run at once.
		if e.pgmqSQL, err = os.ReadFile(o.PgmqSQL); err != nil {
			return nil, fmt.Errorf("bench: pgmq's install file: %w", err)
		}
	}
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

// database is one the bench runs load in: its URL, and a pool of the
// monitor's on it, through which a probe watches the load's windows.
type database struct {
	url string
	mon *pgxpool.Pool
}

// own is the bench's database.
func (e *env) own() database { return database{url: e.dbURL, mon: e.mon} }

// scratchDatabase is a database of the bench's cluster made for one
// measurement and dropped after it.
type scratchDatabase struct {
	database
	name string
}

// newScratchDatabase makes a fresh database on the bench's cluster (from
// template0; the bench's role needs CREATEDB), with a monitor's pool on it.
func (e *env) newScratchDatabase(ctx context.Context, kind string) (*scratchDatabase, error) {
	name := "skipq_bench_" + kind + "_" + strings.ToLower(rand.Text()[:8])
	if _, err := e.mon.Exec(ctx, monitorMark+"CREATE DATABASE "+name+" TEMPLATE template0"); err != nil {
		return nil, fmt.Errorf("database %s: %w", name, err)
	}
	d := &scratchDatabase{name: name}
	var err error
	if d.url, err = inDatabase(e.dbURL, name); err == nil {
		d.mon, err = newPool(ctx, d.url, monitorApp, 4)
	}
	if err != nil {
		d.drop(ctx, e)
		return nil, err
	}
	return d, nil
}

// drop closes the database's monitor pool and drops it.
func (d *scratchDatabase) drop(ctx context.Context, e *env) {
	if d.mon != nil {
		d.mon.Close()
	}
	if _, err := e.mon.Exec(ctx, monitorMark+"DROP DATABASE IF EXISTS "+d.name+" WITH (FORCE)"); err != nil {
		e.logf("drop database %s: %v", d.name, err)
	}
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

// warmPool opens n connections before a run, so the run does not pay for them.
func warmPool(ctx context.Context, pool *pgxpool.Pool, n int) error {
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	conns := make(chan interface{ Release() }, n)
	for range n {
		wg.Go(func() {
			c, err := pool.Acquire(ctx)
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
				return
			}
			conns <- c
		})
	}
	wg.Wait()
	close(conns)
	for c := range conns {
		c.Release()
	}
	return firstErr
}

// bulkLoad runs one loading statement on a connection of its own (named
// setupApp), then ANALYZE of the tables it filled. It returns the seconds
// both took.
func (e *env) bulkLoad(ctx context.Context, tables, sql string, args ...any) (float64, error) {
	cfg, err := pgx.ParseConfig(e.dbURL)
	if err != nil {
		return 0, err
	}
	cfg.RuntimeParams["application_name"] = setupApp
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	start := time.Now()
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		return 0, fmt.Errorf("load: %w", err)
	}
	if _, err := conn.Exec(ctx, "ANALYZE "+tables); err != nil {
		return 0, fmt.Errorf("analyze: %w", err)
	}
	return round(time.Since(start).Seconds(), 1), nil
}

// setup records the server and settings the figures depend on.
func (e *env) setup(ctx context.Context) Setup {
	s := Setup{
		Nodes: e.o.Nodes, External: len(e.o.URLs) > 0, DurationS: e.o.Duration.Seconds(),
		WarmupS: e.o.Warmup.Seconds(), Quick: e.o.Quick, CPUs: cpus(), PgStatStatements: e.pgss, ConsumerShape: e.o.ConsumerShape,
		Settings: map[string]string{}, PgmqFile: e.pgmqFile(),
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
	_, _ = e.mon.Exec(ctx, monitorMark+"VACUUM skipq.messages, skipq.ready, skipq.timers, skipq.timer_sets, "+
		"skipq.topic_pending, skipq.topic_bodies, skipq.topic_copy_parts")
	_, _ = e.mon.Exec(ctx, monitorMark+"VACUUM skipq_bench.raw_messages")
	if e.super {
		_, _ = e.mon.Exec(ctx, monitorMark+"CHECKPOINT")
	}
}

// queueName is a fresh queue name for one run.
func queueName(kind string) string {
	return "bench." + kind + "." + strings.ToLower(rand.Text()[:8])
}
