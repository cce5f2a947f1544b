package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/worker"
)

// A publish leaves its copies pending for the group's claims; the job
// makes those still pending after PendingFor ready messages of the group,
// oldest rows first and at most BatchSize a run, and drops a copy that
// expired before anyone made it.
func TestReadyTopicCopies(t *testing.T) {
	svc, clk, pool := newService(t)
	ctx := context.Background()
	job := worker.NewReadyTopicCopies(pool, svc)
	job.BatchSize = 64 // two pending rows a run
	if _, _, err := svc.PutTopic(ctx, "default", "events", service.TopicSettings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Subscribe(ctx, "default", "events", "group", nil, nil); err != nil {
		t.Fatal(err)
	}
	publishN(t, svc, "events", 70) // rows of 32, 18 and 20 copies
	expires := 5
	if _, err := svc.Publish(ctx, "default", "events", []service.MessageInput{{Body: "short", ExpirationSeconds: &expires}},
		func(int) string { return "" }); err != nil {
		t.Fatal(err)
	}
	counts := func() (pending, ready int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT
			(SELECT coalesce(sum(cardinality(body_ids)), 0) FROM skipq.topic_pending),
			(SELECT count(*) FROM skipq.ready r JOIN skipq.queues q ON q.id = r.queue_id WHERE q.name = 'group')`).
			Scan(&pending, &ready); err != nil {
			t.Fatal(err)
		}
		return pending, ready
	}
	run := func() int {
		t.Helper()
		n, err := job.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := run(); n != 0 {
		t.Fatalf("a run before the copies were pending for long made %d ready", n)
	}
	if p, r := counts(); p != 71 || r != 0 {
		t.Fatalf("%d copies pending, %d ready; want 71 and 0", p, r)
	}
	clk.advance(job.PendingFor + time.Second)
	if n := run(); n != 50 {
		t.Fatalf("a run of two rows reported %d, want their 50 copies", n)
	}
	if p, r := counts(); p != 21 || r != 50 {
		t.Fatalf("after one run %d copies pending, %d ready; want 21 and 50 (the oldest rows)", p, r)
	}
	if n := run(); n != 21 {
		t.Fatalf("the second run (two rows again: 20 copies, and the expired one) reported %d, want 21", n)
	}
	if n := run(); n != 0 {
		t.Fatalf("a run with nothing pending reported %d", n)
	}
	if p, r := counts(); p != 0 || r != 70 {
		t.Fatalf("after the runs %d copies pending, %d ready; want 0 and 70 (the expired one dropped)", p, r)
	}
	got, err := svc.Receive(ctx, "default", "group", service.ReceiveOptions{MaxMessages: new(10)})
	if err != nil || len(got) != 10 || string(got[0].Body) != "0" {
		t.Fatalf("receive after the job: %d messages, first %+v (%v); want 10 from \"0\"", len(got), got, err)
	}
}
