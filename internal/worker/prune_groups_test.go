package worker_test

import (
	"context"
	"testing"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/worker"
)

// A purge leaves the rows of a FIFO queue's groups behind; the job removes
// them batch by batch and keeps the groups that still hold messages.
func TestPruneGroups(t *testing.T) {
	svc, _, pool := newService(t)
	ctx := context.Background()
	yes := true
	for _, queue := range []string{"purged", "busy"} {
		if _, _, err := svc.PutQueue(ctx, "default", queue, service.QueueSettings{FIFO: &yes}); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range []string{"a", "b", "c"} {
		if _, err := svc.Send(ctx, "default", "purged", service.MessageInput{Body: "x", GroupID: g}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.Send(ctx, "default", "busy", service.MessageInput{Body: "x", GroupID: "d"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.PurgeQueue(ctx, "default", "purged"); err != nil {
		t.Fatal(err)
	}
	groups := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM skipq.message_groups`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := groups(); n != 4 {
		t.Fatalf("%d group rows before the job; the purge should leave its 3 and busy's 1", n)
	}
	job := worker.NewPruneGroups(pool, svc)
	job.BatchSize = 2
	pruned := 0
	for range 4 { // the walk wraps around: a run that found none may be at the end
		n, err := job.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pruned += n
	}
	if pruned != 3 || groups() != 1 {
		t.Fatalf("pruned %d, %d group rows left; want 3 and busy's 1", pruned, groups())
	}
}
