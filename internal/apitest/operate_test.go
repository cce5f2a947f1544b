package apitest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

func TestBrowsePaginationWithConcurrentSends(t *testing.T) {
	n := newNode(t)
	for i := range 25 {
		n.send(t, "b", map[string]any{"body": fmt.Sprint(i), "messageId": fmt.Sprintf("m%02d", i)})
	}
	n.receive(t, "b", map[string]any{"maxMessages": 2}) // two in flight
	n.send(t, "b", map[string]any{"body": "later", "delaySeconds": 600})
	var wg sync.WaitGroup
	wg.Go(func() { // appends while we page
		for range 100 {
			if r := n.do(offTest{t}, "POST", "/v1/queues/b/messages", map[string]any{"body": "concurrent"}); r.Status != http.StatusCreated {
				t.Errorf("concurrent send: %d", r.Status)
				return
			}
		}
	})
	var seen []int64
	ids := map[string]int{}
	states := map[string]int{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("pagination does not end")
		}
		body := n.must(t, http.StatusOK, "GET", "/v1/queues/b/messages?limit=7&cursor="+cursor, nil)
		for _, m := range objects(t, body["messages"]) {
			seen = append(seen, num(m["sequence"]))
			ids[m["messageId"].(string)]++
			states[m["state"].(string)]++
			if m["visibleAt"] == nil || m["receiptHandle"] != nil {
				t.Fatalf("browsed message: %v", m)
			}
		}
		next, ok := body["nextCursor"].(string)
		if !ok {
			break
		}
		cursor = next
	}
	wg.Wait()
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("sequences not increasing across pages: %v", seen)
		}
	}
	for i := range 25 {
		if id := fmt.Sprintf("m%02d", i); ids[id] != 1 {
			t.Fatalf("message %s listed %d times", id, ids[id])
		}
	}
	if states["in_flight"] != 2 || states["delayed"] != 1 {
		t.Fatalf("states %v", states)
	}
	body := n.must(t, http.StatusOK, "GET", "/v1/queues/b/messages?state=delayed", nil)
	if d := objects(t, body["messages"]); len(d) != 1 || d[0]["body"] != "later" || body["nextCursor"] != nil {
		t.Fatalf("delayed filter: %v", body)
	}
	wantError(t, n.do(t, "GET", "/v1/queues/b/messages?state=gone", nil), http.StatusBadRequest, "invalid_request", "state")
	wantError(t, n.do(t, "GET", "/v1/queues/b/messages?cursor=zz", nil), http.StatusBadRequest, "invalid_request", "cursor")
	wantError(t, n.do(t, "GET", "/v1/queues/nope/messages", nil), http.StatusNotFound, "not_found")
}

func TestGetAndDeleteOneMessage(t *testing.T) {
	n := newNode(t)
	n.send(t, "g", map[string]any{"body": "x", "messageId": "one"})
	m := n.must(t, http.StatusOK, "GET", "/v1/queues/g/messages/one", nil)
	if m["state"] != "available" || m["body"] != "x" {
		t.Fatalf("got %v", m)
	}
	r := n.receive(t, "g", nil)[0]
	if m = n.must(t, http.StatusOK, "GET", "/v1/queues/g/messages/one", nil); m["state"] != "in_flight" {
		t.Fatalf("after receive: %v", m)
	}
	if resp := n.do(t, "DELETE", "/v1/queues/g/messages/one", nil); resp.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", resp.Status, resp.Raw)
	}
	wantError(t, n.do(t, "DELETE", "/v1/queues/g/messages/one", nil), http.StatusNotFound, "not_found")
	wantError(t, n.do(t, "GET", "/v1/queues/g/messages/one", nil), http.StatusNotFound, "not_found")
	wantError(t, n.do(t, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": r["receiptHandle"]}), http.StatusNotFound, "receipt_stale")
	wantError(t, n.do(t, "GET", "/v1/queues/g/messages/bad%20id", nil), http.StatusBadRequest, "invalid_request", "messageId")
}

// deadLetter sends count messages to queue with maxReceiveCount 1 and a
// dead-letter queue, receives and nacks them all.
func deadLetter(t *testing.T, n *testNode, queue, dlq string, count int) {
	t.Helper()
	for done := 0; done < count; {
		size := min(1000, count-done)
		batch := make([]any, size)
		for i := range batch {
			batch[i] = map[string]any{"body": fmt.Sprint(done + i), "maxReceiveCount": 1, "deadLetterQueue": dlq}
		}
		n.must(t, http.StatusCreated, "POST", "/v1/queues/"+queue+"/messages/batch", map[string]any{"messages": batch})
		msgs := n.receive(t, queue, map[string]any{"maxMessages": 1000})
		handles := make([]any, len(msgs))
		for i, m := range msgs {
			handles[i] = m["receiptHandle"]
		}
		for i := 0; i < len(handles); i += 1024 {
			n.must(t, http.StatusOK, "POST", "/v1/receipts/nack", map[string]any{"receiptHandles": handles[i:min(i+1024, len(handles))]})
		}
		done += len(msgs)
	}
}

func TestDLQListAndSingleRedrive(t *testing.T) {
	n := newNode(t)
	deadLetter(t, n, "orders", "orders.dlq", 3)
	deadLetter(t, n, "payments", "payments.dlq", 2)
	body := n.must(t, http.StatusOK, "GET", "/v1/dlq?limit=2", nil)
	first := objects(t, body["messages"])
	if len(first) != 2 || body["nextCursor"] == nil {
		t.Fatalf("page 1: %v", body)
	}
	body = n.must(t, http.StatusOK, "GET", "/v1/dlq?limit=10&cursor="+body["nextCursor"].(string), nil)
	rest := objects(t, body["messages"])
	if len(rest) != 3 || body["nextCursor"] != nil {
		t.Fatalf("page 2: %v", body)
	}
	all := append(first, rest...)
	for i := 1; i < len(all); i++ {
		if all[i]["deadLetteredAt"].(string) > all[i-1]["deadLetteredAt"].(string) {
			t.Fatalf("not newest first: %v", all)
		}
	}
	body = n.must(t, http.StatusOK, "GET", "/v1/dlq?sourceQueue=payments", nil)
	pay := objects(t, body["messages"])
	if len(pay) != 2 || pay[0]["queue"] != "payments.dlq" || pay[0]["reRoutedFrom"] != "payments" {
		t.Fatalf("filtered: %v", pay)
	}

	id := pay[0]["messageId"].(string)
	out := n.must(t, http.StatusOK, "POST", "/v1/queues/payments.dlq/messages/"+id+"/redrive", nil)
	as := out["redrivenAs"].(map[string]any)
	if as["queue"] != "payments" || as["messageId"] == id || num(as["sequence"]) == 0 {
		t.Fatalf("redrivenAs: %v", as)
	}
	got := n.receive(t, "payments", nil)
	if len(got) != 1 || got[0]["messageId"] != as["messageId"] || got[0]["reRoutedFrom"] != "payments.dlq" ||
		got[0]["deadLetteredAt"] != nil || num(got[0]["receiveCount"]) != 1 {
		t.Fatalf("redriven message: %v", got)
	}
	wantError(t, n.do(t, "POST", "/v1/queues/payments.dlq/messages/"+id+"/redrive", nil), http.StatusNotFound, "not_found")
	// To an explicit queue.
	out = n.must(t, http.StatusOK, "POST", "/v1/queues/payments.dlq/messages/"+pay[1]["messageId"].(string)+"/redrive", map[string]any{"toQueue": "manual"})
	if out["redrivenAs"].(map[string]any)["queue"] != "manual" {
		t.Fatalf("toQueue: %v", out)
	}
	// A message that was never dead-lettered.
	n.send(t, "plain", map[string]any{"body": "x", "messageId": "p"})
	wantError(t, n.do(t, "POST", "/v1/queues/plain/messages/p/redrive", nil), http.StatusConflict, "not_dead_lettered")
}

func TestRacingRedrivesMoveOnce(t *testing.T) {
	a := newNode(t)
	b := startNode(t, a.DB)
	deadLetter(t, a, "r", "r.dlq", 1)
	id := objects(t, a.must(t, http.StatusOK, "GET", "/v1/dlq", nil)["messages"])[0]["messageId"].(string)
	var ok, notFound atomic.Int32
	var wg sync.WaitGroup
	for _, n := range []*testNode{a, b, a, b} {
		wg.Go(func() {
			switch r := n.do(offTest{t}, "POST", "/v1/queues/r.dlq/messages/"+id+"/redrive", nil); r.Status {
			case 200:
				ok.Add(1)
			case 404:
				notFound.Add(1)
			default:
				t.Errorf("redrive: %d %s", r.Status, r.Raw)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 || notFound.Load() != 3 {
		t.Fatalf("%d redrives succeeded and %d found nothing; want 1 and 3", ok.Load(), notFound.Load())
	}
	if got := a.receive(t, "r", map[string]any{"maxMessages": 10}); len(got) != 1 {
		t.Fatalf("destination holds %d messages", len(got))
	}
}

func TestBulkRedriveWhileConsuming(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 25,000 messages")
	}
	a := newNode(t)
	b := startNode(t, a.DB)
	const total = 25000
	deadLetter(t, a, "bulk", "bulk.dlq", total)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	consumed := map[string]int{}
	var wg sync.WaitGroup
	wg.Go(func() { // drains the destination while the redrive runs
		for ctx.Err() == nil {
			msgs := a.receive(offTest{t}, "bulk", map[string]any{"maxMessages": 500, "waitSeconds": 1})
			handles := make([]any, len(msgs))
			mu.Lock()
			for i, m := range msgs {
				consumed[m["body"].(string)]++
				handles[i] = m["receiptHandle"]
			}
			mu.Unlock()
			if len(handles) > 0 {
				a.must(offTest{t}, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandles": handles})
			}
		}
	})
	var moved atomic.Int64
	for _, n := range []*testNode{a, b} { // two nodes redrive at once
		wg.Go(func() {
			for {
				out := n.must(offTest{t}, http.StatusOK, "POST", "/v1/queues/bulk.dlq/redrive", map[string]any{"maxMessages": 3000})
				moved.Add(num(out["moved"]))
				if num(out["remaining"]) == 0 {
					return
				}
			}
		})
	}
	eventually(t, 120e9, "every message to be consumed from the destination", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(consumed) == total
	})
	cancel()
	wg.Wait()
	if moved.Load() != total {
		t.Fatalf("redrives reported %d moved, want %d", moved.Load(), total)
	}
	for body, c := range consumed {
		if c != 1 {
			t.Fatalf("message %s arrived %d times", body, c)
		}
	}
	st := a.must(t, http.StatusOK, "GET", "/v1/queues/bulk.dlq", nil)["stats"].(map[string]any)
	if num(st["total"]) != 0 {
		t.Fatalf("dead-letter queue still holds %v", st)
	}
}
