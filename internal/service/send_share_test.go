package service_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/skipq/skipq/internal/service"
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

// Keyed sends share statements too: concurrent requests carrying the same
// key get the one send it made (a duplicate answer with its sequence), the
// message is stored once, and a request whose key conflicts gets its 409
// alone -- its other message not stored, its neighbours' sends unaffected.
func TestConcurrentKeyedSendsStoreEachKeyOnce(t *testing.T) {
	svc, _, pool := newService(t)
	ctx := context.Background()
	first, err := svc.Send(ctx, "default", "keys", service.MessageInput{Body: "c0", MessageID: "k0"})
	if err != nil {
		t.Fatal(err)
	}
	const senders = 30
	results := make([][]service.SendResult, senders)
	var conflictErr error
	var wg sync.WaitGroup
	for g := range senders + 1 {
		wg.Go(func() {
			key, content := fmt.Sprintf("k%d", g%5), fmt.Sprintf("c%d", g%5)
			if g == senders {
				content = "other content" // conflicts with k0's c0
			}
			res, err := svc.SendBatch(ctx, "default", "keys", []service.MessageInput{
				{Body: content, MessageID: key}, {Body: "own", MessageID: fmt.Sprintf("u%d", g)}})
			if g == senders {
				conflictErr = err
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			results[g] = res
		})
	}
	wg.Wait()
	if service.KindOf(conflictErr) != service.KindIdempotencyConflict {
		t.Fatalf("the conflicting send got %v, want 409", conflictErr)
	}
	seqOf := map[string]int64{"k0": first.Sequence}
	for g, res := range results {
		if len(res) != 2 || res[1].Duplicate {
			t.Fatalf("sender %d got %+v", g, res)
		}
		key := res[0].MessageID
		if s, ok := seqOf[key]; ok && s != res[0].Sequence {
			t.Fatalf("sender %d: key %s answered sequence %d, another sender %d", g, key, res[0].Sequence, s)
		}
		seqOf[key] = res[0].Sequence
	}
	var stored, keys, orphan int
	err = pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT message_id) FILTER (WHERE message_id LIKE 'k%'),
		count(*) FILTER (WHERE message_id = $1) FROM skipq.messages`, fmt.Sprintf("u%d", senders)).Scan(&stored, &keys, &orphan)
	if err != nil || stored != 5+senders || keys != 5 || orphan != 0 {
		t.Fatalf("stored %d messages, %d keys, the conflicting send's other message %d times (%v); want %d, 5, 0",
			stored, keys, orphan, err, 5+senders)
	}
}
