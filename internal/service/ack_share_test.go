package service_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/service"
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

// Nacks and extends share statements as acks do: each request gets its own
// answer (an extend its own lease length, though the statement carried
// others'), a handle two nacks name is credited once, a forged one fails
// only its request, and a nack of a last delivery still dead-letters.
func TestConcurrentNacksAndExtendsGetTheirOwnAnswers(t *testing.T) {
	svc, clk, pool := newService(t)
	ctx := context.Background()
	const n, per, groups = 200, 5, 20 // nacks take the first 100, extends the rest
	one, five, dlq := 1, 5, "settle.dlq"
	batch := make([]service.MessageInput, n)
	for i := range batch {
		batch[i] = service.MessageInput{Body: "x", MaxReceiveCount: &five, DeadLetterQueue: &dlq}
		if i < n/2 && i%2 == 0 {
			batch[i].MaxReceiveCount = &one // its nack dead-letters it
		}
	}
	if _, err := svc.SendBatch(ctx, "default", "settle", batch); err != nil {
		t.Fatal(err)
	}
	max, wait := 1024, 0
	msgs, err := svc.Receive(ctx, "default", "settle", service.ReceiveOptions{MaxMessages: &max, WaitSeconds: &wait})
	if err != nil || len(msgs) != n {
		t.Fatalf("received %d of %d: %v", len(msgs), n, err)
	}
	forged := msgs[0].ReceiptHandle[:len(msgs[0].ReceiptHandle)-4] + "AAAA"
	now := clk.now()

	var mu sync.Mutex
	credited := map[string]int{}
	succeeded, failed := map[bool]int{}, map[bool]int{}
	var wg sync.WaitGroup
	for g := range 2 * groups {
		wg.Go(func() {
			extend := g >= groups
			base := 0
			if extend {
				base = n / 2
			}
			i0 := (g % groups) * per
			var hs []string
			for i := range per {
				hs = append(hs, msgs[base+i0+i].ReceiptHandle)
			}
			if !extend {
				// The next request's first: an extend keeps a handle
				// valid, so two extends of one handle may both succeed.
				hs = append(hs, msgs[(i0+per)%(n/2)].ReceiptHandle)
			}
			hs = append(hs, forged)
			var res service.SettleResult
			if extend {
				seconds := 100 + g
				vr, err := svc.SetVisibility(ctx, hs, seconds)
				if err != nil {
					t.Error(err)
					return
				}
				for _, until := range vr.VisibleUntil {
					if d := until.Sub(now.Add(time.Duration(seconds) * time.Second)); d < -time.Millisecond || d > time.Millisecond {
						t.Errorf("request %d (%d s) got a lease ending %v, want %v", g, seconds, until, now.Add(time.Duration(seconds)*time.Second))
					}
				}
				if len(vr.VisibleUntil) != vr.Succeeded {
					t.Errorf("request %d: %d leases for %d settled handles", g, len(vr.VisibleUntil), vr.Succeeded)
				}
				res = vr.SettleResult
			} else {
				nacked, err := svc.Nack(ctx, hs, nil)
				if err != nil {
					t.Error(err)
					return
				}
				res = nacked
			}
			stale := map[string]bool{}
			for _, f := range res.Failed {
				stale[f.ReceiptHandle] = true
			}
			mu.Lock()
			defer mu.Unlock()
			succeeded[extend] += res.Succeeded
			failed[extend] += len(res.Failed)
			for _, h := range hs {
				if !stale[h] {
					credited[h]++
				}
			}
		})
	}
	wg.Wait()
	if succeeded[false] != n/2 || failed[false] != 2*groups || succeeded[true] != n/2 || failed[true] != groups {
		t.Fatalf("nacks: %d succeeded, %d failed (want %d, %d); extends: %d succeeded, %d failed (want %d, %d)",
			succeeded[false], failed[false], n/2, 2*groups, succeeded[true], failed[true], n/2, groups)
	}
	for _, m := range msgs {
		if credited[m.ReceiptHandle] != 1 {
			t.Fatalf("handle of message %d credited %d times", m.Sequence, credited[m.ReceiptHandle])
		}
	}
	var ready, dead, leased int
	err = pool.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE q.name = 'settle' AND m.ready),
		count(*) FILTER (WHERE q.name = 'settle.dlq'),
		count(*) FILTER (WHERE q.name = 'settle' AND NOT m.ready AND m.visible_at > $1::timestamptz + interval '99 seconds')
		FROM skipq.messages m JOIN skipq.queues q ON q.id = m.queue_id`, now).Scan(&ready, &dead, &leased)
	if err != nil || ready != n/4 || dead != n/4 || leased != n/2 {
		t.Fatalf("%d available, %d dead-lettered, %d on extended leases (%v); want %d, %d, %d", ready, dead, leased, err, n/4, n/4, n/2)
	}
}
