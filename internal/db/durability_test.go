package db

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/testdb"
)

// An async statement commits with synchronous_commit off for its own
// transaction only: the connection's next statement waits again.
func TestAsyncCommitLeavesNoSetting(t *testing.T) {
	ctx := context.Background()
	url := testdb.New(t)
	// Test clusters run without waiting for flushes: this database waits.
	if err := setDatabaseDefault(ctx, url); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1 // one connection: a leaked setting would show
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	setting := func(q DBTX) string {
		t.Helper()
		var v string
		if err := q.QueryRow(ctx, "SELECT current_setting('synchronous_commit')").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		name string
		q    DBTX
		want string
	}{
		{"async", Committing(pool, CommitAsync), "off"},
		{"async unless moved", Committing(pool, CommitAsyncUnlessMoved), "off"},
		{"lock-bounded async", LockBoundedCommitting(pool, CommitAsync), "off"},
		{"durable", Committing(pool, CommitDurable), "on"},
		{"lock-bounded durable", LockBoundedCommitting(pool, CommitDurable), "on"},
	} {
		if got := setting(c.q); got != c.want {
			t.Errorf("%s: synchronous_commit %s in the statement, want %s", c.name, got, c.want)
		}
		if got := setting(direct{pool: pool}); got != "on" {
			t.Errorf("after %s: synchronous_commit %s on the connection, want on", c.name, got)
		}
	}
}

// durableIfMoved turns the flush wait back on exactly for a transaction
// that inserted or deleted messages: a send, a nack that dead-letters; not
// a claim or a nack that makes the message available again.
func TestDurableIfMovedSeesMoves(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	// run runs sql in a transaction with synchronous_commit off, then the
	// trailer, and returns the setting the commit would use.
	run := func(sql string, args ...any) string {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Commit(ctx) }()
		if _, err := tx.Exec(ctx, "SELECT "+asyncCommit+", "+movedBefore); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, durableIfMoved); err != nil {
			t.Fatal(err)
		}
		var v string
		if err := tx.QueryRow(ctx, "SELECT current_setting('synchronous_commit')").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	receive := func(queue string) string {
		t.Helper()
		var h string
		if err := conn.QueryRow(ctx, "SELECT receipt_handle FROM skipq.receive($1, visibility_seconds => 60)", queue).Scan(&h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	if got := run("SELECT skipq.send('again', 'x'::bytea, max_receive_count => 5)"); got != "on" {
		t.Errorf("send: %s, want on", got)
	}
	if got := run("SELECT count(*) FROM skipq.receive('again')"); got != "off" {
		t.Errorf("claim: %s, want off", got)
	}
	if _, err := conn.Exec(ctx, "SELECT skipq.send('again', 'y'::bytea, max_receive_count => 5)"); err != nil {
		t.Fatal(err)
	}
	if got := run("SELECT skipq.nack($1)", receive("again")); got != "off" {
		t.Errorf("nack back to available: %s, want off", got)
	}
	if _, err := conn.Exec(ctx, "SELECT skipq.send('last', 'x'::bytea, max_receive_count => 1, dead_letter_queue => 'last.dlq')"); err != nil {
		t.Fatal(err)
	}
	if got := run("SELECT skipq.nack($1)", receive("last")); got != "on" {
		t.Errorf("nack that dead-letters: %s, want on", got)
	}
}

// setDatabaseDefault makes synchronous_commit on the default of the
// database of url, for the connections opened after it.
func setDatabaseDefault(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }()
	var name string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&name); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" SET synchronous_commit = on")
	return err
}
