package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/worker"
)

// The gauge snapshot counts dead letters under the queue they came from,
// the depth history copies each snapshot once per period for the queues
// that hold something, and drops what is older than a day.
func TestQueueGaugesAndDepthHistory(t *testing.T) {
	svc, clk, pool := newService(t)
	ctx := context.Background()
	gaugesJob, depth := worker.NewRefreshQueueCounts(pool, svc), worker.NewRecordDepthHistory(pool, svc)
	one, dlq := 1, "src.dlq"
	for range 2 {
		if _, err := svc.Send(ctx, "default", "src", service.MessageInput{Body: "x", MaxReceiveCount: &one, DeadLetterQueue: &dlq}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := svc.PutQueue(ctx, "default", "empty", service.QueueSettings{}); err != nil {
		t.Fatal(err)
	}
	msgs, err := svc.Receive(ctx, "default", "src", service.ReceiveOptions{WaitSeconds: new(0)})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %v %v", msgs, err)
	}
	if _, err := svc.Nack(ctx, []string{msgs[0].ReceiptHandle}, nil); err != nil {
		t.Fatal(err)
	}
	gauges := func(tenant string) map[string]service.QueueGauge {
		t.Helper()
		gs, _, err := svc.QueueGauges(ctx, tenant, "", 100, "")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]service.QueueGauge{}
		for _, g := range gs {
			out[g.Name] = g
		}
		return out
	}
	if g := gauges("default"); len(g) != 3 || g["src"].Available != nil {
		t.Fatalf("before the first snapshot: %+v", g)
	}
	if err := gaugesJob.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	g := gauges("default")
	if src, d := g["src"], g["src.dlq"]; *src.Available != 1 || *src.DeadLettered != 1 || *d.Available != 1 || *d.DeadLettered != 0 {
		t.Fatalf("snapshot: src %+v, dlq %+v", src, d)
	}

	record := func() {
		t.Helper()
		if err := gaugesJob.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if err := depth.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	record()
	record() // within the period: no second copy
	points, err := svc.DepthHistory(ctx, "default", "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 1 || points[0].Available != 2 || points[0].DeadLettered != 1 {
		t.Fatalf("tenant history: %+v", points)
	}
	clk.advance(service.DepthHistoryPeriod + worker.QueueCountsPeriod)
	record()
	for _, q := range []string{"src", "empty"} {
		points, err = svc.DepthHistory(ctx, "default", q, time.Hour)
		if err != nil || len(points) != 2 {
			t.Fatalf("%s history: %+v %v", q, points, err)
		}
	}
	if points[0].Available != 0 || points[1].Available != 0 {
		t.Fatalf("an empty queue's history: %+v", points)
	}
	if points, err = svc.DepthHistory(ctx, "other", "", time.Hour); err != nil || len(points) != 2 ||
		points[0].Available != 0 || points[1].Available != 0 {
		t.Fatalf("another tenant's history: %+v %v", points, err)
	}
	if _, err := svc.DepthHistory(ctx, "other", "src", time.Hour); service.KindOf(err) != service.KindNotFound {
		t.Fatalf("another tenant's queue: %v", err)
	}

	clk.advance(service.DepthHistoryKept + time.Minute)
	record()
	if points, err = svc.DepthHistory(ctx, "default", "src", 3*service.DepthHistoryKept); err != nil || len(points) != 1 {
		t.Fatalf("after a day: %+v %v", points, err)
	}
}
