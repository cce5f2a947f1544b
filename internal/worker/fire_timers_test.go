package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/worker"
)

// The flat-claim invariant (docs/DESIGN.md, "The claim"): a message has a row
// in skipq.ready exactly when messages.ready is true, and a message that is
// not ready has a timer that will ready it (or dead-letter it) unless it is
// settled first. Checked after every step of a workload that takes every
// path that inserts, deletes or changes messages.
func TestReadyRowsFollowEveryPath(t *testing.T) {
	svc, clk, pool := newService(t)
	ctx := context.Background()
	fire, expire := worker.NewFireTimers(pool, svc), worker.NewRemoveExpired(pool, svc)
	check := func(step string) {
		t.Helper()
		var mismatched, orphanReady, untimed int
		err := pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM skipq.messages m
			 WHERE m.ready <> EXISTS (SELECT 1 FROM skipq.ready r WHERE r.queue_id = m.queue_id AND r.sequence = m.sequence)),
			(SELECT count(*) FROM skipq.ready r
			 WHERE NOT EXISTS (SELECT 1 FROM skipq.messages m WHERE m.queue_id = r.queue_id AND m.sequence = r.sequence)),
			(SELECT count(*) FROM skipq.messages m
			 WHERE NOT m.ready AND NOT EXISTS (
			     SELECT 1 FROM skipq.timers t WHERE t.queue_id = m.queue_id AND t.sequence = m.sequence AND t.due_at <= m.visible_at))`).
			Scan(&mismatched, &orphanReady, &untimed)
		if err != nil {
			t.Fatal(err)
		}
		if mismatched+orphanReady+untimed != 0 {
			t.Fatalf("after %s: %d messages whose ready flag disagrees with skipq.ready, %d ready rows without a message, %d waiting messages without a timer",
				step, mismatched, orphanReady, untimed)
		}
	}
	one, two, vis, delay, zero := 1, 2, 30, 60, 0
	dlq := "paths.dlq"
	receive := func(queue string, max int, o service.ReceiveOptions) []service.Message {
		t.Helper()
		o.MaxMessages, o.WaitSeconds = &max, &zero
		msgs, err := svc.Receive(ctx, "default", queue, o)
		if err != nil {
			t.Fatal(err)
		}
		return msgs
	}
	handles := func(msgs []service.Message) []string {
		var hs []string
		for _, m := range msgs {
			hs = append(hs, m.ReceiptHandle)
		}
		return hs
	}

	batch := make([]service.MessageInput, 10)
	for i := range batch {
		batch[i] = service.MessageInput{Body: "x", MaxReceiveCount: &two, DeadLetterQueue: &dlq}
	}
	batch[0].DelaySeconds = &delay
	if _, err := svc.SendBatch(ctx, "default", "paths", batch); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `SELECT skipq.send('paths', 'sql'), skipq.send('paths', 'sql later', delay_seconds => 60)`); err != nil {
		t.Fatal(err)
	}
	check("HTTP and SQL sends, delayed and not")

	got := receive("paths", 6, service.ReceiveOptions{VisibilitySeconds: &vis})
	check("a claim")
	if _, err := svc.Ack(ctx, handles(got[:1])); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Nack(ctx, handles(got[1:2]), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetVisibility(ctx, handles(got[2:3]), 120); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Requeue(ctx, handles(got[3:4]), "paths.other"); err != nil {
		t.Fatal(err)
	}
	check("ack, nack, extend, requeue")
	receive("paths", 1, service.ReceiveOptions{AutoAck: true})
	receive("paths", 3, service.ReceiveOptions{IsPeek: true})
	check("autoAck and peek")

	// Every lease and delay runs out: the worker readies what it must, and a
	// stale-but-valid handle of a readied message is settled by its holder.
	clk.advance(5 * time.Minute)
	if _, err := fire.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	check("timers fired")
	if _, err := svc.Ack(ctx, handles(got[4:5])); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetVisibility(ctx, handles(got[5:6]), 30); err != nil {
		t.Fatal(err)
	}
	check("ack and extend of leases the worker had readied")

	// Two deliveries each, then the worker dead-letters the second leases.
	for range 2 {
		receive("paths", 100, service.ReceiveOptions{VisibilitySeconds: &one})
		clk.advance(time.Minute)
		if _, err := fire.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		check("leases that ran out, up to dead-lettering")
	}
	if moved, _, err := svc.RedriveQueue(ctx, "default", dlq, "paths.redriven", 1000); err != nil || moved == 0 {
		t.Fatalf("redrive moved %d: %v", moved, err)
	}
	check("redrive")

	exp := 1
	if _, err := svc.Send(ctx, "default", "paths.redriven", service.MessageInput{Body: "short-lived", ExpirationSeconds: &exp, MessageID: "gone-soon"}); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteMessage(ctx, "default", "paths.redriven", "gone-soon"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Send(ctx, "default", "paths.redriven", service.MessageInput{Body: "short-lived", ExpirationSeconds: &exp}); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Minute)
	if n, err := expire.RunOnce(ctx); err != nil || n == 0 {
		t.Fatalf("expired %d: %v", n, err)
	}
	check("operator delete and expiry")
	if _, err := svc.PurgeQueue(ctx, "default", "paths.redriven"); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteQueue(ctx, "default", "paths.other"); err != nil {
		t.Fatal(err)
	}
	check("purge and queue deletion")
}
