package testdb_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/skipq/skipq/internal/testdb"
)

func TestNewGivesDistinctMigratedDatabases(t *testing.T) {
	ctx := context.Background()
	a, b := testdb.New(t), testdb.New(t)
	if a == b {
		t.Fatalf("both tests got %s", a)
	}
	names := map[string]bool{}
	for _, url := range []string{a, b} {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var name string
		var hasQueues bool
		err = conn.QueryRow(ctx, "SELECT current_database(), to_regclass('skipq.queues') IS NOT NULL").Scan(&name, &hasQueues)
		if err != nil {
			t.Fatal(err)
		}
		if !hasQueues {
			t.Errorf("%s has no table skipq.queues", name)
		}
		names[name] = true
	}
	if len(names) != 2 {
		t.Errorf("databases are not distinct: %v", names)
	}

	// A test's writes stay in its own database.
	connA, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer connA.Close(ctx)
	if _, err := connA.Exec(ctx, "CREATE TABLE only_in_a (id int)"); err != nil {
		t.Fatal(err)
	}
	connB, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer connB.Close(ctx)
	var seen bool
	if err := connB.QueryRow(ctx, "SELECT to_regclass('only_in_a') IS NOT NULL").Scan(&seen); err != nil {
		t.Fatal(err)
	}
	if seen {
		t.Error("a table made in one test database shows in the other")
	}
}

func TestThroughPgBouncer(t *testing.T) {
	ctx := context.Background()
	direct := testdb.New(t)
	through := testdb.ThroughPgBouncer(t, direct)
	if through == direct {
		t.Fatalf("ThroughPgBouncer returned the direct URL %s", direct)
	}
	cfg, err := pgx.ParseConfig(through)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec // no prepared statement outlives a transaction
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("%v%s", err, testdb.PgBouncerLog(0))
	}
	defer conn.Close(ctx)
	var onBouncer, onDirect string
	if err := conn.QueryRow(ctx, "SELECT current_database() || ' ' || (to_regclass('skipq.queues') IS NOT NULL)").Scan(&onBouncer); err != nil {
		t.Fatal(err)
	}
	if err := connectQuery(ctx, direct, "SELECT current_database() || ' ' || (to_regclass('skipq.queues') IS NOT NULL)", &onDirect); err != nil {
		t.Fatal(err)
	}
	if onBouncer != onDirect || !strings.HasSuffix(onBouncer, " true") {
		t.Errorf("through PgBouncer %q, direct %q", onBouncer, onDirect)
	}
	if again := testdb.ThroughPgBouncer(t, direct); again != through {
		t.Errorf("a second call gives %s, want %s (one bouncer per process)", again, through)
	}

	// Not the test server: left alone.
	other := "postgres://postgres@127.0.0.1:1/x?sslmode=disable"
	if got := testdb.ThroughPgBouncer(t, other); got != other {
		t.Errorf("ThroughPgBouncer(%s) = %s", other, got)
	}
}

func connectQuery(ctx context.Context, url, sql string, dest any) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, sql).Scan(dest)
}
