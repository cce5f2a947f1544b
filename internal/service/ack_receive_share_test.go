package service_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/skipq/skipq/internal/service"
)

// Concurrent single-message receives that carry acks share one claim and
// one ack statement: each request still gets exactly its own handles'
// results and one message of its own, and every message is acked once.
func TestConcurrentAckAndReceiveShareAndAckEachOnce(t *testing.T) {
	svc, _, pool := newService(t)
	ctx := context.Background()
	const consumers, rounds = 16, 5
	batch := make([]service.MessageInput, consumers*(rounds+1))
	for i := range batch {
		batch[i] = service.MessageInput{Body: "x"}
	}
	if _, err := svc.SendBatch(ctx, "default", "ackrecv", batch); err != nil {
		t.Fatal(err)
	}
	one, wait := 1, 0
	opts := service.ReceiveOptions{MaxMessages: &one, WaitSeconds: &wait}
	var acked atomic.Int64
	var mu sync.Mutex
	seen := map[int64]int{} // sequence → deliveries
	var wg sync.WaitGroup
	for range consumers {
		wg.Go(func() {
			msgs, err := svc.Receive(ctx, "default", "ackrecv", opts)
			if err != nil || len(msgs) != 1 {
				t.Errorf("first receive: %d messages, %v", len(msgs), err)
				return
			}
			for range rounds {
				h := msgs[0].ReceiptHandle
				forged := h[:len(h)-4] + "AAAA"
				var res service.SettleResult
				msgs, res, err = svc.AckAndReceive(ctx, "default", "ackrecv", []string{h, forged}, opts)
				if err != nil {
					t.Error(err)
					return
				}
				if res.Succeeded != 1 || len(res.Failed) != 1 || res.Failed[0].ReceiptHandle != forged {
					t.Errorf("ack result %+v: want its own handle settled and the forged one failed", res)
					return
				}
				acked.Add(1)
				if len(msgs) != 1 {
					t.Errorf("receive after ack: %d messages", len(msgs))
					return
				}
				mu.Lock()
				seen[msgs[0].Sequence]++
				mu.Unlock()
			}
			if res, err := svc.Ack(ctx, []string{msgs[0].ReceiptHandle}); err != nil || res.Succeeded != 1 {
				t.Errorf("last ack: %+v, %v", res, err)
			}
			acked.Add(1)
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for seq, n := range seen {
		if n != 1 {
			t.Fatalf("message %d delivered %d times", seq, n)
		}
	}
	var left int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM skipq.messages").Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d messages left, %d acked (%v)", left, acked.Load(), err)
	}
}
