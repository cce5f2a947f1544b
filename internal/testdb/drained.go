package testdb

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DrainedStatistics leaves skipq.messages as a drained queue leaves it:
// 20,000 messages come and go (in the queue "drained" of the tenant "t"),
// one delayed message stays at the table's end, and VACUUM ANALYZE records
// one live row over hundreds of pages. Autovacuum is off for the table so
// that nothing analyzes it again while a test builds up a backlog behind
// statements planned on those statistics.
func DrainedStatistics(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	ExecAll(t, pool,
		`ALTER TABLE skipq.messages SET (autovacuum_enabled = false)`,
		`INSERT INTO skipq.queues (tenant, name) VALUES ('t', 'drained') ON CONFLICT DO NOTHING`,
		`INSERT INTO skipq.messages (queue_id, message_id, sent_at, visible_at, max_receive_count, lease_token, receive_count)
		 SELECT q.id, 'gone-' || g, now(), now() + interval '1 hour', 10, uuid_send(gen_random_uuid()), 1
		 FROM skipq.queues q, generate_series(1, 20000) g WHERE q.tenant = 't' AND q.name = 'drained'`,
		`INSERT INTO skipq.messages (queue_id, message_id, sent_at, visible_at, delayed_to, max_receive_count)
		 SELECT q.id, 'delayed', now(), now() + interval '1 day', now() + interval '1 day', 10
		 FROM skipq.queues q WHERE q.tenant = 't' AND q.name = 'drained'`,
		`DELETE FROM skipq.messages WHERE message_id LIKE 'gone-%'`,
	)
	VacuumAnalyze(t, pool, "skipq.messages")
}

// ExecAll runs each statement on pool in turn, failing the test at the
// first that fails.
func ExecAll(t testing.TB, pool *pgxpool.Pool, stmts ...string) {
	t.Helper()
	for _, stmt := range stmts {
		if _, err := pool.Exec(context.Background(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
}

// VacuumAnalyze vacuums and analyzes tables until the vacuum has removed
// every dead row: until each table's pages are all visible to every
// transaction. A snapshot that another backend of the database holds (an
// autovacuum worker analyzing some other table, say) keeps the rows a test
// just deleted, and their index entries, from being removed; a plan test
// would then count reads of them. Index cleanup is forced, so that a vacuum
// never skips the indexes for having few dead rows.
func VacuumAnalyze(t testing.TB, pool *pgxpool.Pool, tables ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		if _, err := pool.Exec(ctx, "VACUUM (ANALYZE, INDEX_CLEANUP ON) "+strings.Join(tables, ", ")); err != nil {
			t.Fatalf("vacuum %v: %v", tables, err)
		}
		var clean bool
		if err := pool.QueryRow(ctx, `SELECT bool_and(relallvisible = relpages) FROM pg_class
			WHERE oid = ANY($1::text[]::regclass[])`, tables).Scan(&clean); err != nil {
			t.Fatalf("vacuum %v: %v", tables, err)
		}
		if clean {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("vacuum %v: dead rows still there after a minute (a transaction holding an old snapshot?)", tables)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ExplainedBuffers runs sql under EXPLAIN (ANALYZE, BUFFERS) on q (a
// connection or a transaction) and returns the shared buffers its top node
// touched, which for a function call counts those of the statements it
// ran.
func ExplainedBuffers(t testing.TB, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, sql string, args ...any) int {
	t.Helper()
	var doc []byte
	if err := q.QueryRow(context.Background(), "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args...).Scan(&doc); err != nil {
		t.Fatal(err)
	}
	var plans []struct {
		Plan struct {
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
		}
	}
	if err := json.Unmarshal(doc, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("explain: %v %s", err, doc)
	}
	return plans[0].Plan.Hit + plans[0].Plan.Read
}
