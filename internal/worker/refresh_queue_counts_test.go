package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/worker"
)

// gaugeReadings keeps the observer's last QueueCounts.
type gaugeReadings struct {
	ignoredObserver
	mu     sync.Mutex
	counts map[string]service.QueueCount
}

func (g *gaugeReadings) QueueCounts(counts []service.QueueCount, _ time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.counts = map[string]service.QueueCount{}
	for _, c := range counts {
		g.counts[c.Tenant+"/"+c.Queue] = c
	}
}

// withDeadLetter fills queue src with an available message and one
// dead-lettered to src.dlq by a nack, next to an empty queue.
func withDeadLetter(t *testing.T, svc *service.Service) {
	t.Helper()
	ctx := context.Background()
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
}

// The gauge snapshot counts dead letters under the queue they came from,
// and the observer (the metrics) gets each reading.
func TestRefreshQueueCounts(t *testing.T) {
	obs := &gaugeReadings{}
	svc, _, pool := newObservedService(t, obs)
	ctx := context.Background()
	gaugesJob := worker.NewRefreshQueueCounts(pool, svc)
	withDeadLetter(t, svc)
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
	// Before the first snapshot: no snapshot's time or dead-lettered count
	// (the counts of a queue this small are read at request time).
	if g := gauges("default"); len(g) != 3 || g["src"].CountedAt != nil || g["src"].DeadLettered != nil || !g["src"].CountedNow {
		t.Fatalf("before the first snapshot: %+v", g)
	}
	if err := gaugesJob.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	g := gauges("default")
	if src, d := g["src"], g["src.dlq"]; *src.Available != 1 || *src.DeadLettered != 1 || *d.Available != 1 || *d.DeadLettered != 0 {
		t.Fatalf("snapshot: src %+v, dlq %+v", src, d)
	}

	obs.mu.Lock()
	defer obs.mu.Unlock()
	if src := obs.counts["default/src"]; src.Available != 1 || obs.counts["default/src.dlq"].Available != 1 {
		t.Fatalf("observed %+v", obs.counts)
	}
}
