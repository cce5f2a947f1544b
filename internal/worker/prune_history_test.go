package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/worker"
)

// historyOf is a message's history as "type@queue" words, plus the events.
func historyOf(t *testing.T, svc *service.Service, queue, id string) (string, []service.HistoryEvent) {
	t.Helper()
	events, err := svc.MessageHistory(context.Background(), "default", queue, id)
	if err != nil {
		t.Fatalf("history of %s/%s: %v", queue, id, err)
	}
	words := make([]string, len(events))
	for i, e := range events {
		words[i] = e.Type + "@" + e.Queue
	}
	return strings.Join(words, " "), events
}

func receiveOne(t *testing.T, svc *service.Service, ctx context.Context, queue string) service.Message {
	t.Helper()
	vis := 30
	msgs, err := svc.Receive(ctx, "default", queue, service.ReceiveOptions{VisibilitySeconds: &vis, WaitSeconds: new(0)})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive from %s: %v %v", queue, msgs, err)
	}
	return msgs[0]
}

// The other ends of a message: autoAck, requeue, delete, purge, expiry, and
// a retained ack, each the last event (the moves and the retained message
// excepted), and kept after the message is gone.
func TestHistoryRecordsEveryEnd(t *testing.T) {
	svc, clk, pool := newService(t)
	ctx := context.Background()
	expire, prune := worker.NewRemoveExpired(pool, svc), worker.NewPruneHistory(pool, svc)
	expire.BatchSize, prune.BatchSize = 100, 100
	on, exp, retain := true, 5, 3600
	for _, q := range []string{"a", "b"} {
		if _, _, err := svc.PutQueue(ctx, "default", q, service.QueueSettings{Trace: &on}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := svc.PutQueue(ctx, "default", "r", service.QueueSettings{Trace: &on, RetainAckedSeconds: &retain}); err != nil {
		t.Fatal(err)
	}
	send := func(queue, id string, exp *int) {
		t.Helper()
		if _, err := svc.Send(ctx, "default", queue, service.MessageInput{Body: "b", MessageID: id, ExpirationSeconds: exp}); err != nil {
			t.Fatal(err)
		}
	}
	send("a", "auto", nil)
	msgs, err := svc.Receive(ctx, "default", "a", service.ReceiveOptions{AutoAck: true, WaitSeconds: new(0)})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("autoAck receive: %v %v", msgs, err)
	}
	send("a", "moved", nil)
	m := receiveOne(t, svc, ctx, "a")
	if _, err := svc.Requeue(ctx, []string{m.ReceiptHandle}, "b"); err != nil {
		t.Fatal(err)
	}
	send("a", "deleted", nil)
	if err := svc.DeleteMessage(ctx, "default", "a", "deleted"); err != nil {
		t.Fatal(err)
	}
	send("b", "purged", nil)
	if _, err := svc.PurgeQueue(ctx, "default", "b"); err != nil {
		t.Fatal(err)
	}
	send("a", "expiring", &exp)
	send("r", "kept", nil)
	m = receiveOne(t, svc, ctx, "r")
	if _, err := svc.Ack(ctx, []string{m.ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	clk.advance(10 * time.Second)
	if _, err := expire.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ queue, id, want string }{
		{"a", "auto", "sent@a received@a acked@a"},
		{"a", "moved", "sent@a received@a requeued@a deleted@b"}, // the purge of b took it
		{"b", "moved", "sent@a received@a requeued@a deleted@b"},
		{"a", "deleted", "sent@a deleted@a"},
		{"b", "purged", "sent@b deleted@b"},
		{"a", "expiring", "sent@a expired@a"},
		{"r", "kept", "sent@r received@r acked@r"},
	} {
		if got, _ := historyOf(t, svc, c.queue, c.id); got != c.want {
			t.Errorf("%s/%s:\n got %s\nwant %s", c.queue, c.id, got, c.want)
		}
	}
	// Pruned a day after the message was gone, not before; the retained
	// message's history stays while it is.
	var traces int
	count := func() int {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(DISTINCT trace_id) FROM skipq.message_events`).Scan(&traces); err != nil {
			t.Fatal(err)
		}
		return traces
	}
	if n, err := prune.RunOnce(ctx); err != nil || n != 0 || count() != 6 {
		t.Fatalf("pruned %d (%v) at once; %d traces", n, err, traces)
	}
	clk.advance(time.Duration(service.HistoryKeepSeconds+1) * time.Second)
	if _, err := prune.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if count() != 1 {
		t.Fatalf("%d traces left, want the retained message's", traces)
	}
	if _, err := svc.MessageHistory(ctx, "default", "a", "auto"); service.KindOf(err) != service.KindNotFound {
		t.Fatalf("pruned history: %v", err)
	}
	if got, _ := historyOf(t, svc, "r", "kept"); !strings.HasSuffix(got, "acked@r") {
		t.Fatalf("retained: %s", got)
	}
}
