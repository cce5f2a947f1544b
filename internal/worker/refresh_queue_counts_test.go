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

// A count larger than a step is spread over runs: the snapshot stays as it
// was until the pass reaches the table's end, then holds the whole count.
func TestRefreshQueueCountsInSteps(t *testing.T) {
	obs := &gaugeReadings{}
	svc, _, pool := newObservedService(t, obs)
	ctx := context.Background()
	gaugesJob := worker.NewRefreshQueueCounts(pool, svc)
	gaugesJob.BatchSize = 1 // a page a step
	withDeadLetter(t, svc)
	batch := make([]service.MessageInput, 200)
	for i := range batch {
		batch[i] = service.MessageInput{Body: "x"}
	}
	if _, err := svc.SendBatch(ctx, "default", "many", batch); err != nil {
		t.Fatal(err)
	}
	var pages int
	if err := pool.QueryRow(ctx, "SELECT pg_relation_size('skipq.messages') / current_setting('block_size')::bigint").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if pages < 2 {
		t.Fatalf("the messages fill %d page: no second step", pages)
	}
	for step := 1; step <= pages; step++ {
		if err := gaugesJob.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		obs.mu.Lock()
		many, counted := obs.counts["default/many"]
		src := obs.counts["default/src"]
		obs.mu.Unlock()
		if step < pages && counted {
			t.Fatalf("step %d of %d published a snapshot: %+v", step, pages, many)
		}
		if step == pages && (!counted || many.Available != 200 || src.Available != 1) {
			t.Fatalf("after the pass of %d steps: %+v", pages, obs.counts)
		}
	}
	var dead int64
	if err := pool.QueryRow(ctx, "SELECT dead_lettered FROM skipq.queue_counts WHERE name = 'src'").Scan(&dead); err != nil || dead != 1 {
		t.Fatalf("src's dead-lettered count: %d %v", dead, err)
	}
}
