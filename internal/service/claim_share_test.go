package service_test

import (
	"context"
	"sync"
	"testing"

	"github.com/skipq/skipq/internal/service"
)

// Concurrent single-message receives share claims, and every message still
// goes to exactly one of them; the receives the queue had no message for
// answer empty.
func TestConcurrentSingleReceivesGetOneMessageEach(t *testing.T) {
	svc, _, _ := newService(t)
	ctx := context.Background()
	const messages, receivers = 30, 50
	batch := make([]service.MessageInput, messages)
	for i := range batch {
		batch[i] = service.MessageInput{Body: "x"}
	}
	if _, err := svc.SendBatch(ctx, "default", "claims", batch); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[int64]int{}
	empty := 0
	var wg sync.WaitGroup
	for range receivers {
		wg.Go(func() {
			one, wait := 1, 0
			msgs, err := svc.Receive(ctx, "default", "claims", service.ReceiveOptions{MaxMessages: &one, WaitSeconds: &wait})
			if err != nil || len(msgs) > 1 {
				t.Errorf("receive: %d messages, %v", len(msgs), err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if len(msgs) == 0 {
				empty++
				return
			}
			if msgs[0].ReceiptHandle == "" || msgs[0].ReceiveCount != 1 {
				t.Errorf("message %d came without a lease: %+v", msgs[0].Sequence, msgs[0])
			}
			got[msgs[0].Sequence]++
		})
	}
	wg.Wait()
	if len(got) != messages || empty != receivers-messages {
		t.Fatalf("%d distinct messages received, %d receives empty; want %d and %d", len(got), empty, messages, receivers-messages)
	}
	for seq, n := range got {
		if n != 1 {
			t.Fatalf("message %d delivered %d times", seq, n)
		}
	}
}
