package service_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/skipq/skipq/service"
)

// Concurrent sends share INSERTs (per queue), and each request gets back
// exactly its own messages: the right ids, in order, each stored once with
// its own body -- also for a queue that the first send creates.
func TestConcurrentSendsGetTheirOwnResults(t *testing.T) {
	svc, _, pool := newService(t)
	ctx := context.Background()
	const senders, per = 40, 3
	results := make([][]service.SendResult, senders)
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			queue := []string{"shared.a", "shared.b", fmt.Sprintf("shared.new%d", g%4)}[g%3]
			in := make([]service.MessageInput, per)
			for i := range in {
				in[i] = service.MessageInput{Body: fmt.Sprintf("%d/%d", g, i)}
			}
			res, err := svc.SendBatch(ctx, "default", queue, in)
			if err != nil {
				t.Error(err)
				return
			}
			results[g] = res
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for g, res := range results {
		if len(res) != per {
			t.Fatalf("sender %d got %d results", g, len(res))
		}
		for i, r := range res {
			if seen[r.MessageID] || (i > 0 && r.Sequence <= res[i-1].Sequence) {
				t.Fatalf("sender %d: result %d (%s, sequence %d) repeats another or breaks the batch's order", g, i, r.MessageID, r.Sequence)
			}
			seen[r.MessageID] = true
			var body string
			err := pool.QueryRow(ctx, `SELECT convert_from(body, 'UTF8') FROM skipq.messages
				WHERE message_id = $1 AND sequence = $2`, r.MessageID, r.Sequence).Scan(&body)
			if err != nil || body != fmt.Sprintf("%d/%d", g, i) {
				t.Fatalf("sender %d, message %d: stored body %q (%v)", g, i, body, err)
			}
		}
	}
	var total int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM skipq.messages").Scan(&total); err != nil || total != senders*per {
		t.Fatalf("%d messages stored (%v), want %d", total, err, senders*per)
	}
}
