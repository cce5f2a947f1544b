package db

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PoolOptions are the pool settings skipq exposes.
type PoolOptions struct {
	MaxConns int32
	// ConnectTimeout bounds how long a request waits for a new connection when
	// the database is unreachable, so the API answers 503 instead of hanging.
	ConnectTimeout time.Duration
	// Log hears, once, that the pool found itself behind a transaction
	// pooler and stopped keeping prepared statements (nil: slog.Default).
	Log *slog.Logger
}

// NewPool opens a pgx pool. It does not wait for the database: a node starts
// (and answers 503) while Postgres is away.
//
// Nothing on these connections is session state beyond what pgx caches for
// itself, so they work through PgBouncer in transaction pooling: no startup
// parameters beyond the URL's own, and the plan settings that skipq's
// statements need are set per transaction (Open, TxOptions) or carried
// by the functions the hot paths call. What pgx caches is its prepared
// statements, the fastest on a direct connection, which a transaction
// pooler cannot keep; see followPooler for how the pool finds out.
func NewPool(ctx context.Context, url string, opts PoolOptions) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.ConnectTimeout > 0 {
		cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	}
	cfg.HealthCheckPeriod = 5 * time.Second
	dropReadOnly(cfg.ConnConfig)
	var pool atomic.Pointer[pgxpool.Pool]
	if !setsExecMode(cfg.ConnString()) {
		log := opts.Log
		if log == nil {
			log = slog.Default()
		}
		followPooler(cfg, log, func() *pgxpool.Pool { return pool.Load() })
	}
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	pool.Store(p)
	return p, nil
}

// setsExecMode reports whether the URL chooses pgx's statement mode itself
// (default_query_exec_mode): then the pool keeps to it.
func setsExecMode(connString string) bool {
	return strings.Contains(connString, "default_query_exec_mode")
}

// followPooler makes a pool that keeps pgx's prepared statements switch to
// unnamed ones the first time the server shows it is a transaction pooler:
// a statement named by this connection already exists (SQLSTATE 42P05, a
// client connection that prepared it ran its transaction on the same server
// connection) or one it prepared is gone (26000, its transaction ran on
// another). Both are answered before the statement runs, so nothing was
// done. From then on every new connection caches only statement
// descriptions (pgx's cache_describe, which docs/OPERATIONS.md lets operators
// put in a pooled URL), the connections that met the error are closed, the
// idle ones replaced, and the switch is logged once. The few statements
// that failed meanwhile are retried (RetryPooled) or answered 503.
func followPooler(cfg *pgxpool.Config, log *slog.Logger, pool func() *pgxpool.Pool) {
	var pooled atomic.Bool
	cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		if pooled.Load() {
			cc.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
		}
		return nil
	}
	next := cfg.ConnConfig.OnPgError
	cfg.ConnConfig.OnPgError = func(c *pgconn.PgConn, e *pgconn.PgError) bool {
		if !isPoolerStatementCode(e.Code) {
			return next == nil || next(c, e)
		}
		if pooled.CompareAndSwap(false, true) {
			log.Warn("the database URL leads to a transaction pooler: prepared statements do not survive a transaction there, "+
				"so this node now sends unnamed statements (as default_query_exec_mode=cache_describe in the URL would)",
				"sqlstate", e.Code)
			if p := pool(); p != nil {
				go p.Reset()
			}
		}
		return false
	}
}

// isPoolerStatementCode: 42P05 duplicate_prepared_statement, 26000
// invalid_sql_statement_name.
func isPoolerStatementCode(code string) bool { return code == "42P05" || code == "26000" }

// IsPoolerStatementError reports whether err is a prepared statement
// meeting a transaction pooler (see followPooler): the statement did not
// run, and running it again on another connection is safe.
func IsPoolerStatementError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && isPoolerStatementCode(pgErr.Code)
}

// pooledAttempts bounds the runs of one statement that meets a pooler's
// prepared-statement error: enough for the pool to replace the connections
// that still hold named statements.
const pooledAttempts = 3

// ReadOnlySQLState is SQLSTATE 25006 (read_only_sql_transaction): a write
// reached a server that does not take writes.
const ReadOnlySQLState = "25006"

// dropReadOnly closes a connection whose server answers a write with
// SQLSTATE 25006. skipq never opens read-only transactions, so that server
// is no longer the primary -- demoted, or made read-only without a restart
// -- and target_session_attrs=read-write checks only at connect: the
// connection would stay in the pool and fail every write on it. Closed, it
// is replaced by one that the URL's host list leads to the primary. (pgx's
// own handler, which closes on FATAL errors, still runs for the rest.)
func dropReadOnly(cfg *pgx.ConnConfig) {
	next := cfg.OnPgError
	cfg.OnPgError = func(c *pgconn.PgConn, e *pgconn.PgError) bool {
		if e.Code == ReadOnlySQLState {
			return false
		}
		return next == nil || next(c, e)
	}
}

// planSettings pins skipq's plans for the rest of the transaction it runs in.
// Every skipq statement is written for an index. Queue tables are often
// analyzed while nearly empty, and with such statistics a sequential or
// bitmap scan (or a sort, or a hash join over one) looks free: forbidding
// them leaves the intended index scans whatever the statistics say
// (docs/DESIGN.md, "The claim"). Without sorts, ORDER BY sequence LIMIT n
// can only be the ordered walk of the primary key. A plan that has to use a
// "disabled" node (the sort of a batch insert's ORDER BY, say) costs over
// 10^10, far above jit_above_cost: JIT goes off too, or such statements
// would be compiled on every call (~270 ms).
const planSettings = `SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
	set_config('enable_sort', 'off', true), set_config('enable_hashjoin', 'off', true),
	set_config('enable_mergejoin', 'off', true), set_config('jit', 'off', true)`

// TxOptions begin a transaction with the plan settings in force, in the same
// round trip as the BEGIN.
var TxOptions = pgx.TxOptions{BeginQuery: "BEGIN; " + planSettings}

// planned runs each statement outside an explicit transaction with the plan
// settings in force for it alone: the settings and the statement go in one
// pipeline (one round trip), which Postgres runs as one implicit transaction,
// so set_config(..., true) reaches exactly that statement and nothing
// outlives it.
type planned struct{ pool *pgxpool.Pool }

var _ DBTX = planned{}

func (p planned) piped() piped { return piped{pool: p.pool, setup: planSettings} }

// Exec runs one statement with the plan settings (piped.Exec).
func (p planned) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return p.piped().Exec(ctx, sql, args...)
}

// Query runs one statement with the plan settings (piped.Query).
func (p planned) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return p.piped().Query(ctx, sql, args...)
}

// QueryRow runs one statement with the plan settings (piped.QueryRow).
func (p planned) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return p.piped().QueryRow(ctx, sql, args...)
}

// SharedLockTimeout is how long a statement that several requests share
// may wait for a lock before it fails with SQLSTATE 55P03
// (IsLockNotAvailable). Such a statement must never wait on a lock held by
// a transaction outside it -- an open SQL transaction holding a FIFO
// group, an idempotency key or a message row -- or every request queued
// behind it on the node waits too. skipq's own statements hold their locks
// for a few milliseconds; a wait longer than this is, nearly always, on
// someone else's transaction, and the requests it carried run again each on
// its own, where waiting is right.
const SharedLockTimeout = 20 * time.Millisecond

// lockBoundedCall sets lock_timeout for the rest of the transaction it
// runs in; lockBounded is the statement of it.
var (
	lockBoundedCall = fmt.Sprintf("set_config('lock_timeout', '%dms', true)", SharedLockTimeout.Milliseconds())
	lockBounded     = "SELECT " + lockBoundedCall
)

// LockBounded runs each statement as it is (no plan settings: the functions
// it calls carry their own) with lock_timeout at SharedLockTimeout, set for
// that statement alone in the same pipeline and implicit transaction (as
// planned sets its settings). A statement that fails on the timeout stored
// nothing: the error aborts the implicit transaction as a whole.
func LockBounded(pool *pgxpool.Pool) DBTX { return piped{pool: pool, setup: lockBounded} }

// LockBoundedTxOptions begin a transaction with the plan settings and the
// shared lock timeout in force, in the same round trip as the BEGIN.
var LockBoundedTxOptions = pgx.TxOptions{BeginQuery: "BEGIN; " + planSettings + "; " + lockBounded}

// piped runs one statement behind setup, a statement of set_config(...,
// true) calls, in one pipeline: Postgres runs both as one implicit
// transaction, so the settings reach exactly that statement. trailer, when
// not empty, is a statement without arguments run after it in the same
// transaction (its result is read and dropped when the batch closes).
type piped struct {
	pool    *pgxpool.Pool
	setup   string
	trailer string
}

func (p piped) send(ctx context.Context, sql string, args []any) pgx.BatchResults {
	b := &pgx.Batch{}
	b.Queue(p.setup)
	b.Queue(sql, args...)
	if p.trailer != "" {
		b.Queue(p.trailer)
	}
	return p.pool.SendBatch(ctx, b)
}

// Exec runs one statement behind the setup. It returns only once the
// implicit transaction committed: the statement's own result arrives
// before the commit (at the pipeline's Sync), and a commit that fails --
// the server dying in between -- shows only when the batch is closed.
func (p piped) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return retryPooled(func() (pgconn.CommandTag, error) { return p.exec(ctx, sql, args) })
}

func (p piped) exec(ctx context.Context, sql string, args []any) (pgconn.CommandTag, error) {
	br := p.send(ctx, sql, args)
	_, err := br.Exec()
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	return tag, err
}

// Query runs one statement behind the setup; closing the rows releases
// the connection.
func (p piped) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return queryPooled(func() (pgx.Rows, error) { return p.query(ctx, sql, args) })
}

func (p piped) query(ctx context.Context, sql string, args []any) (pgx.Rows, error) {
	br := p.send(ctx, sql, args)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow runs one statement behind the setup and reads one row, as pgx's
// QueryRow does (pgx.ErrNoRows when there is none).
func (p piped) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := p.Query(ctx, sql, args...)
	return &batchRow{rows: rows, err: err}
}

// direct runs each statement as it is, with nothing piped ahead.
type direct struct{ pool *pgxpool.Pool }

var _ DBTX = direct{}

// Exec runs one statement.
func (d direct) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return retryPooled(func() (pgconn.CommandTag, error) { return d.pool.Exec(ctx, sql, args...) })
}

// Query runs one statement; closing the rows releases the connection.
func (d direct) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return queryPooled(func() (pgx.Rows, error) { return d.pool.Query(ctx, sql, args...) })
}

// QueryRow runs one statement and reads one row (pgx.ErrNoRows when there
// is none).
func (d direct) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := d.Query(ctx, sql, args...)
	return &batchRow{rows: rows, err: err}
}

// retryPooled runs a statement again, on another connection, while it
// meets a transaction pooler's prepared-statement error (see followPooler),
// at most pooledAttempts times: such a statement never ran.
func retryPooled[T any](run func() (T, error)) (T, error) {
	v, err := run()
	for attempt := 1; attempt < pooledAttempts && IsPoolerStatementError(err); attempt++ {
		v, err = run()
	}
	return v, err
}

// queryPooled runs a query as retryPooled does, and again should the
// pooler's error come in place of its first row (a statement pgx believes
// prepared is sent without a round trip of its own, so the server's answer
// that it does not exist arrives with the rows).
func queryPooled(run func() (pgx.Rows, error)) (pgx.Rows, error) {
	rows, err := retryPooled(run)
	if err != nil {
		return nil, err
	}
	return &pooledRows{Rows: rows, run: run}, nil
}

// pooledRows are a query's rows that, while no row has been read, replace
// themselves with a new run's on a pooler's prepared-statement error.
type pooledRows struct {
	pgx.Rows
	run      func() (pgx.Rows, error)
	reruns   int
	started  bool
	rerunErr error
}

func (r *pooledRows) Next() bool {
	for {
		if r.Rows.Next() {
			r.started = true
			return true
		}
		if r.started || r.reruns+1 >= pooledAttempts || !IsPoolerStatementError(r.Rows.Err()) {
			return false
		}
		r.Rows.Close()
		r.reruns++
		rows, err := r.run()
		if err != nil {
			r.rerunErr = err
			return false
		}
		r.Rows = rows
	}
}

func (r *pooledRows) Err() error {
	if r.rerunErr != nil {
		return r.rerunErr
	}
	return r.Rows.Err()
}

// RetryPooled runs a transaction again while it fails on a transaction
// pooler's prepared-statement error (see followPooler): the transaction
// rolled back, and nothing of it was done.
func RetryPooled(tx func() error) error {
	_, err := retryPooled(func() (struct{}, error) { return struct{}{}, tx() })
	return err
}

// batchRows are a batch's result rows; Close also closes the batch, which
// gives its connection back to the pool. The last Next closes it, so that
// Err, which callers check after reading the rows and before their
// deferred Close, reports whether the implicit transaction committed (as
// pgx's own rows do): the rows arrive before the commit, and reporting them
// as a success before it would answer a client for a send or an ack that a
// server crash then undid (caught by make chaos's kill -9 of PostgreSQL).
type batchRows struct {
	pgx.Rows
	br       pgx.BatchResults
	closeErr error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.closeErr = r.br.Close()
		r.br = nil
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.closeErr
}

type batchRow struct {
	rows pgx.Rows
	err  error
}

func (r *batchRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}
