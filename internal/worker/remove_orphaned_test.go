package worker_test

import (
	"context"
	"testing"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/worker"
)

// The messages of a queue whose row is gone (a send that raced the queue's
// deletion) are removed batch by batch; other queues' messages stay.
func TestRemoveOrphaned(t *testing.T) {
	svc, _, pool := newService(t)
	ctx := context.Background()
	for _, queue := range []string{"gone", "gone", "gone", "kept"} {
		if _, err := svc.Send(ctx, "default", queue, service.MessageInput{Body: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	// The queue row alone goes, as if its deletion had committed before
	// these sends' inserts (internal/db/queue_delete_test.go plays the race).
	if _, err := pool.Exec(ctx, `DELETE FROM skipq.queues WHERE name = 'gone'`); err != nil {
		t.Fatal(err)
	}
	job := worker.NewRemoveOrphaned(pool, svc)
	job.BatchSize = 2
	for _, want := range []int{2, 1, 0} {
		if n, err := job.RunOnce(ctx); err != nil || n != want {
			t.Fatalf("removed %d (%v); want %d", n, err, want)
		}
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM skipq.messages`).Scan(&left); err != nil || left != 1 {
		t.Fatalf("%d messages left (%v); want kept's one", left, err)
	}
}
