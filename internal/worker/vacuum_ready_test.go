package worker_test

import (
	"context"
	"testing"

	"github.com/skipq/skipq/internal/worker"
)

// The ready table's vacuum runs once claims (here a purge) left enough dead
// ready rows, and not before.
func TestVacuumReady(t *testing.T) {
	svc, _, pool := newService(t)
	ctx := context.Background()
	// In this test's own database only the worker vacuums (autovacuum could
	// clean the dead rows before the test sees them).
	if _, err := pool.Exec(ctx, "ALTER TABLE skipq.ready SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	vacuums := func() int64 {
		var n int64
		if err := pool.QueryRow(ctx, "SELECT pg_stat_get_vacuum_count('skipq.ready'::regclass)").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	job := worker.NewVacuumReady(pool, svc)
	if err := job.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n := vacuums(); n != 0 {
		t.Fatalf("%d vacuums of a ready table without dead rows", n)
	}
	leaveDeadRows(t, svc, pool, "r", 2, "skipq.ready", worker.ReadyVacuumDeadTuples)
	if err := job.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if vacuums() < 1 {
		t.Fatal("no vacuum of the ready table ran")
	}
}
