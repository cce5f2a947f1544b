package service_test

import (
	"context"
	"sync"
	"testing"

	"github.com/skipq/skipq/service"
)

// Concurrent acks share statements, and each request still gets exactly its
// own answer: a handle two requests name at once is credited to one of them,
// a stale handle fails only its own request.
func TestConcurrentAcksSettleEachMessageOnce(t *testing.T) {
	svc, _, pool := newService(t)
	ctx := context.Background()
	const n, per = 200, 5
	batch := make([]service.MessageInput, n)
	for i := range batch {
		batch[i] = service.MessageInput{Body: "x"}
	}
	if _, err := svc.SendBatch(ctx, "default", "acks", batch); err != nil {
		t.Fatal(err)
	}
	max, wait := 1024, 0
	msgs, err := svc.Receive(ctx, "default", "acks", service.ReceiveOptions{MaxMessages: &max, WaitSeconds: &wait})
	if err != nil || len(msgs) != n {
		t.Fatalf("received %d of %d: %v", len(msgs), n, err)
	}
	forged := msgs[0].ReceiptHandle[:len(msgs[0].ReceiptHandle)-4] + "AAAA"

	var mu sync.Mutex
	credited := map[string]int{}
	succeeded, failed := 0, 0
	var wg sync.WaitGroup
	for g := range n / per {
		wg.Go(func() {
			// Its own five, the next request's first, and a forged one.
			var hs []string
			for i := range per {
				hs = append(hs, msgs[g*per+i].ReceiptHandle)
			}
			hs = append(hs, msgs[(g*per+per)%n].ReceiptHandle, forged)
			res, err := svc.Ack(ctx, hs)
			if err != nil {
				t.Error(err)
				return
			}
			stale := map[string]bool{}
			for _, f := range res.Failed {
				stale[f.ReceiptHandle] = true
			}
			mu.Lock()
			defer mu.Unlock()
			succeeded += res.Succeeded
			failed += len(res.Failed)
			for _, h := range hs {
				if !stale[h] {
					credited[h]++
				}
			}
		})
	}
	wg.Wait()
	if succeeded != n || failed != 2*(n/per) {
		t.Fatalf("%d succeeded and %d failed; want %d and %d (every message once; the overlap and the forged handle fail)",
			succeeded, failed, n, 2*(n/per))
	}
	for _, m := range msgs {
		if credited[m.ReceiptHandle] != 1 {
			t.Fatalf("handle of message %d credited %d times", m.Sequence, credited[m.ReceiptHandle])
		}
	}
	var left int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM skipq.messages").Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d messages left after acking all (%v)", left, err)
	}
}
