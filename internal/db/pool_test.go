package db_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/testdb"
)

// A Planned statement's rows arrive before its implicit transaction
// commits; a commit that fails must still fail the call, before the rows
// are closed by the caller -- or a send or an ack would be answered as done
// although it was undone (a server crash at that moment does it; a deferred
// constraint does it deterministically).
func TestPlannedReportsAFailedCommit(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE TABLE deferred (id int,
		CONSTRAINT deferred_id_key UNIQUE (id) DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	p := db.Planned(pool)

	// Query, read as sqlc reads: Next until false, then Err, then Close.
	rows, err := p.Query(ctx, "INSERT INTO deferred VALUES (1), (1) RETURNING id")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); !db.IsUniqueViolation(err, "deferred_id_key") {
		t.Fatalf("read %d rows; Err = %v, want the commit's unique violation", n, err)
	}
	rows.Close()

	if _, err := p.Exec(ctx, "INSERT INTO deferred VALUES (2), (2)"); !db.IsUniqueViolation(err, "deferred_id_key") {
		t.Fatalf("Exec = %v, want the commit's unique violation", err)
	}
	var id int
	if err := p.QueryRow(ctx, "INSERT INTO deferred VALUES (3), (3) RETURNING id").Scan(&id); !db.IsUniqueViolation(err, "deferred_id_key") {
		t.Fatalf("QueryRow = %v, want the commit's unique violation", err)
	}
	var stored int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM deferred").Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("%d rows stored (%v): every insert should have rolled back", stored, err)
	}
}

// docs/OPERATIONS.md#postgresql-failover: a cancelled request never sends a CancelRequest, which
// PostgreSQL would answer, for a commit waiting on its synchronous standby,
// with success plus a warning -- a commit acknowledged that a failover can
// lose. pgx's deadline watcher drops the connection instead; the pool keeps
// it.
func TestPoolCancelsByDroppingTheConnection(t *testing.T) {
	ctx := context.Background()
	pool, err := db.NewPool(ctx, testdb.New(t), db.PoolOptions{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	h := pool.Config().ConnConfig.BuildContextWatcherHandler(conn.Conn().PgConn())
	if _, ok := h.(*pgconn.DeadlineContextWatcherHandler); !ok {
		t.Fatalf("context watcher %T, want *pgconn.DeadlineContextWatcherHandler", h)
	}
}

// A LockBounded statement that waits on a lock longer than its timeout
// fails with lock_not_available and stores nothing: what it wrote before
// the wait goes with its implicit transaction, so the requests it carried
// can each run again without storing anything twice. The timeout is its
// own: the connection goes back to the pool without it.
func TestLockBoundedFailsWholeAndLeavesNoSetting(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE TABLE written (id int);
		CREATE FUNCTION write_then_lock() RETURNS void LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO written VALUES (1);
			PERFORM pg_advisory_xact_lock(42);
		END $$`); err != nil {
		t.Fatal(err)
	}
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_xact_lock(42)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.LockBounded(pool).Exec(ctx, "SELECT write_then_lock()"); !db.IsLockNotAvailable(err) {
		t.Fatalf("Exec = %v, want lock_not_available", err)
	}
	var stored int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM written").Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("%d rows stored (%v): the failed statement should have stored nothing", stored, err)
	}
	var setting string
	if err := pool.QueryRow(ctx, "SHOW lock_timeout").Scan(&setting); err != nil || setting != "0" {
		t.Fatalf("lock_timeout after the statement: %q (%v), want the default 0", setting, err)
	}
}
