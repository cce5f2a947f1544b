package db

import (
	"context"
	"fmt"
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
}

// NewPool opens a pgx pool. It does not wait for the database: a node starts
// (and answers 503) while Postgres is away.
//
// Nothing on these connections is session state beyond what pgx caches for
// itself, so they work through PgBouncer in transaction pooling (SPEC §1):
// no startup parameters beyond the URL's own, and the plan settings that
// skipq's statements need are set per transaction (Planned, TxOptions) or
// carried by the functions the hot paths call. pgx keeps its prepared
// statements (the fastest on a direct connection); behind a transaction
// pooler the URL adds default_query_exec_mode=cache_describe
// (docs/OPERATIONS.md), and as sends, claims, acks and extends are function
// calls whose inner plans PostgreSQL caches, only the one-line call is
// planned per request.
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
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	return pool, nil
}

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
// would be compiled on every call (~270 ms). The few statements that must
// scan (the gauges) lift these for their own transaction (PlanAllowScans).
const planSettings = `SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
	set_config('enable_sort', 'off', true), set_config('enable_hashjoin', 'off', true),
	set_config('enable_mergejoin', 'off', true), set_config('jit', 'off', true)`

// TxOptions begin a transaction with the plan settings in force, in the same
// round trip as the BEGIN.
var TxOptions = pgx.TxOptions{BeginQuery: "BEGIN; " + planSettings}

// Planned runs each statement outside an explicit transaction with the plan
// settings in force for it alone: the settings and the statement go in one
// pipeline (one round trip), which Postgres runs as one implicit transaction,
// so set_config(..., true) reaches exactly that statement and nothing
// outlives it.
type Planned struct{ Pool *pgxpool.Pool }

var _ DBTX = Planned{}

func (p Planned) piped() piped { return piped{pool: p.Pool, setup: planSettings} }

// Exec runs one statement with the plan settings (piped.Exec).
func (p Planned) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return p.piped().Exec(ctx, sql, args...)
}

// Query runs one statement with the plan settings (piped.Query).
func (p Planned) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return p.piped().Query(ctx, sql, args...)
}

// QueryRow runs one statement with the plan settings (piped.QueryRow).
func (p Planned) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
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

// lockBounded sets lock_timeout for the rest of the transaction it runs in.
var lockBounded = fmt.Sprintf("SELECT set_config('lock_timeout', '%dms', true)", SharedLockTimeout.Milliseconds())

// LockBounded runs each statement as it is (no plan settings: the functions
// it calls carry their own) with lock_timeout at SharedLockTimeout, set for
// that statement alone in the same pipeline and implicit transaction (as
// Planned sets its settings). A statement that fails on the timeout stored
// nothing: the error aborts the implicit transaction as a whole.
func LockBounded(pool *pgxpool.Pool) DBTX { return piped{pool: pool, setup: lockBounded} }

// LockBoundedTxOptions begin a transaction with the plan settings and the
// shared lock timeout in force, in the same round trip as the BEGIN.
var LockBoundedTxOptions = pgx.TxOptions{BeginQuery: "BEGIN; " + planSettings + "; " + lockBounded}

// piped runs one statement behind setup, a statement of set_config(...,
// true) calls, in one pipeline: Postgres runs both as one implicit
// transaction, so the settings reach exactly that statement.
type piped struct {
	pool  *pgxpool.Pool
	setup string
}

func (p piped) send(ctx context.Context, sql string, args []any) pgx.BatchResults {
	b := &pgx.Batch{}
	b.Queue(p.setup)
	b.Queue(sql, args...)
	return p.pool.SendBatch(ctx, b)
}

// Exec runs one statement behind the setup. It returns only once the
// implicit transaction committed: the statement's own result arrives
// before the commit (at the pipeline's Sync), and a commit that fails --
// the server dying in between -- shows only when the batch is closed.
func (p piped) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
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
