package service_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/skipq/skipq/internal/service"
)

// Sends that share a statement with a message-by-message send whose key
// conflicts: the shared statement stores nothing, every request then goes
// alone; the all-or-nothing ones store everything, the message-by-message
// ones everything but the conflicting message, each message once.
func TestConcurrentSendEachWithConflicts(t *testing.T) {
	svc, _, pool := newService(t)
	ctx := context.Background()
	if _, err := svc.Send(ctx, "default", "mixed", service.MessageInput{Body: "first", MessageID: "k"}); err != nil {
		t.Fatal(err)
	}
	const senders, per = 30, 3
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			in := make([]service.MessageInput, per)
			for i := range in {
				in[i] = service.MessageInput{Body: fmt.Sprintf("%d/%d", g, i)}
			}
			if g%2 == 0 {
				if _, err := svc.SendBatch(ctx, "default", "mixed", in); err != nil {
					t.Error(err)
				}
				return
			}
			in[1].MessageID = "k" // sent before with other content
			res, err := svc.SendEach(ctx, "default", "mixed", in, nil)
			switch {
			case err != nil:
				t.Error(err)
			case res[0].Err != nil || res[2].Err != nil:
				t.Errorf("sender %d: a valid message failed: %v, %v", g, res[0].Err, res[2].Err)
			case res[1].Err == nil || res[1].Err.Kind != service.KindIdempotencyConflict:
				t.Errorf("sender %d: the conflicting message answered %+v", g, res[1])
			}
		})
	}
	wg.Wait()
	var total, distinct int
	err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT body) FROM skipq.messages`).Scan(&total, &distinct)
	want := 1 + senders/2*per + senders/2*(per-1)
	if err != nil || total != want || distinct != want {
		t.Fatalf("%d messages (%d distinct bodies) stored (%v), want %d", total, distinct, err, want)
	}
}
