package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/worker"
)

// The depth history copies each snapshot once per period for the queues
// that hold something, and drops what is older than a day.
func TestRecordDepthHistory(t *testing.T) {
	svc, clk, pool := newService(t)
	ctx := context.Background()
	gaugesJob, depth := worker.NewRefreshQueueCounts(pool, svc), worker.NewRecordDepthHistory(pool, svc)
	withDeadLetter(t, svc)
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
