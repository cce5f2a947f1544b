package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/worker"
)

// expiries counts MessagesExpired per queue.
type expiries struct {
	ignoredObserver
	mu sync.Mutex
	n  map[string]int
}

func (e *expiries) MessagesExpired(_, queue string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n[queue] += n
}

// A retained message's lease timer neither readies it nor files itself
// again, and its removal at the end of the retention is no expiry; an
// unacked message of the same queue expires as before.
func TestRetainedMessagesLeaveTheTimersAndTheExpiryCount(t *testing.T) {
	obs := &expiries{n: map[string]int{}}
	svc, clk, pool := newObservedService(t, obs)
	ctx := context.Background()
	fire, expire := worker.NewFireTimers(pool, svc), worker.NewRemoveExpired(pool, svc)
	fire.BatchSize, expire.BatchSize = 100, 100
	retain, exp, vis, two := 60, 30, 10, 2
	if _, _, err := svc.PutQueue(ctx, "default", "r", service.QueueSettings{RetainAckedSeconds: &retain}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"kept", "expiring"} {
		if _, err := svc.Send(ctx, "default", "r", service.MessageInput{Body: "b", MessageID: id, ExpirationSeconds: &exp}); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := svc.Receive(ctx, "default", "r", service.ReceiveOptions{MaxMessages: &two, VisibilitySeconds: &vis, WaitSeconds: new(0)})
	if err != nil || len(msgs) != 2 || msgs[0].MessageID != "kept" {
		t.Fatalf("receive: %v %v", msgs, err)
	}
	if res, err := svc.Ack(ctx, []string{msgs[0].ReceiptHandle}); err != nil || res.Succeeded != 1 {
		t.Fatalf("ack: %+v %v", res, err)
	}

	clk.advance(15 * time.Second) // both leases ran out
	fireAll(t, fire)
	var timers int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM skipq.timers) + (SELECT count(*) FROM skipq.timer_sets)`).Scan(&timers); err != nil {
		t.Fatal(err)
	}
	if timers != 0 {
		t.Fatalf("%d timers left after the leases ended", timers)
	}
	kept, err := svc.GetMessage(ctx, "default", "r", "kept")
	if err != nil || kept.State != service.StateAcked {
		t.Fatalf("retained message after its lease's end: %+v %v", kept, err)
	}
	if again, err := svc.GetMessage(ctx, "default", "r", "expiring"); err != nil || again.State != service.StateAvailable {
		t.Fatalf("unacked message after its lease's end: %+v %v", again, err)
	}

	clk.advance(2 * time.Minute) // the expiry and the retention have passed
	if n, err := expire.RunOnce(ctx); err != nil || n != 2 {
		t.Fatalf("removed %d (%v), want 2", n, err)
	}
	if obs.n["r"] != 1 {
		t.Fatalf("%d expiries counted, want 1 (the retained message's removal is none)", obs.n["r"])
	}
}
