package worker_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/worker"
)

// dedupQueue is the queue of the test, with a one-minute window.
const dedupQueue = "dedup"

// The worker's cleanup drops exactly the keys that are dead: window passed
// and message gone. A key inside its window, or whose message is still
// queued, stays.
func TestDropOldDedupKeys(t *testing.T) {
	svc, clk, pool := newService(t)
	if _, _, err := svc.PutQueue(context.Background(), "default", dedupQueue, service.QueueSettings{DedupWindowSeconds: new(60)}); err != nil {
		t.Fatal(err)
	}
	keys := func() []string {
		t.Helper()
		rows, err := pool.Query(context.Background(), "SELECT message_id FROM skipq.dedup_keys ORDER BY message_id")
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	sendKeyed := func(id string) error {
		t.Helper()
		_, err := svc.Send(context.Background(), "default", dedupQueue, service.MessageInput{MessageID: id, Body: id})
		return err
	}
	drop := worker.NewDropOldDedupKeys(pool, svc)
	drop.BatchSize = 100
	for _, id := range []string{"old-gone", "old-queued"} {
		if err := sendKeyed(id); err != nil {
			t.Fatal(err)
		}
	}
	clk.advance(2 * time.Minute) // the first two keys' window is over
	for _, id := range []string{"new-gone", "new-queued"} {
		if err := sendKeyed(id); err != nil {
			t.Fatal(err)
		}
	}
	// The *-gone messages leave the queue; the *-queued ones stay, in flight.
	msgs, err := svc.Receive(context.Background(), "default", dedupQueue,
		service.ReceiveOptions{MaxMessages: new(100), WaitSeconds: new(0)})
	if err != nil || len(msgs) != 4 {
		t.Fatalf("received %d of 4 messages: %v", len(msgs), err)
	}
	handles := map[string]string{}
	for _, m := range msgs {
		handles[m.MessageID] = m.ReceiptHandle
	}
	ack := func(ids ...string) {
		t.Helper()
		var hs []string
		for _, id := range ids {
			hs = append(hs, handles[id])
		}
		if res, err := svc.Ack(context.Background(), hs); err != nil || res.Succeeded != len(ids) {
			t.Fatalf("acking %v: %+v %v", ids, res, err)
		}
	}
	ack("old-gone", "new-gone")
	if n, err := drop.RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("dropped %d keys (%v); want 1", n, err)
	}
	if got, want := keys(), []string{"new-gone", "new-queued", "old-queued"}; !slices.Equal(got, want) {
		t.Fatalf("keys left: %v; want %v", got, want)
	}
	// Once its message leaves, the window-passed key goes too.
	ack("old-queued", "new-queued")
	if n, err := drop.RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("second round dropped %d keys (%v); want 1", n, err)
	}
	if got, want := keys(), []string{"new-gone", "new-queued"}; !slices.Equal(got, want) {
		t.Fatalf("keys left: %v; want %v", got, want)
	}
}
