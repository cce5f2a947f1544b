package worker_test

import (
	"context"
	"testing"
	"time"

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
	batch := make([]service.MessageInput, 1000)
	for i := range batch {
		batch[i] = service.MessageInput{Body: "x"}
	}
	for range 12 {
		if _, err := svc.SendBatch(ctx, "default", "v", batch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.PurgeQueue(ctx, "default", "v"); err != nil {
		t.Fatal(err)
	}
	// The statistics collector reports dead rows a little late.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var dead int64
		if err := pool.QueryRow(ctx, "SELECT pg_stat_get_dead_tuples('skipq.messages'::regclass)").Scan(&dead); err != nil {
			t.Fatal(err)
		}
		if dead >= worker.VacuumDeadTuples {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d dead rows reported", dead)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
