package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/worker"
)

// The worker's vacuum runs outside a transaction and clears dead rows.
func TestVacuumMessages(t *testing.T) {
	svc, _, pool := newService(t)
	ctx := context.Background()
	// Autovacuum (aggressive on this table) could clean the dead rows
	// before the test sees them; in this test's own database only the
	// worker vacuums.
	if _, err := pool.Exec(ctx, "ALTER TABLE skipq.messages SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	leaveDeadRows(t, svc, pool, "v", 12, "skipq.messages", worker.VacuumDeadTuples)
	if err := worker.NewVacuumMessages(pool, svc).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	var vacuums int64
	if err := pool.QueryRow(ctx, "SELECT pg_stat_get_vacuum_count('skipq.messages'::regclass)").Scan(&vacuums); err != nil {
		t.Fatal(err)
	}
	if vacuums < 1 {
		t.Fatal("no vacuum ran")
	}
}

// leaveDeadRows sends batches of 1,000 messages to queue, purges it, and
// waits until the statistics report at least want dead rows in table.
func leaveDeadRows(t *testing.T, svc *service.Service, pool *pgxpool.Pool, queue string, batches int, table string, want int64) {
	t.Helper()
	ctx := context.Background()
	batch := make([]service.MessageInput, 1000)
	for i := range batch {
		batch[i] = service.MessageInput{Body: "x"}
	}
	for range batches {
		if _, err := svc.SendBatch(ctx, "default", queue, batch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.PurgeQueue(ctx, "default", queue); err != nil {
		t.Fatal(err)
	}
	// The statistics collector reports dead rows a little late.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var dead int64
		if err := pool.QueryRow(ctx, "SELECT pg_stat_get_dead_tuples($1::regclass)", table).Scan(&dead); err != nil {
			t.Fatal(err)
		}
		if dead >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d dead rows reported in %s", dead, table)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
