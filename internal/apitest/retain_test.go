package apitest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/testdb"
)

// Retention of settled messages (docs/API.md#model).

// receiveOne receives the queue's next message, failing when there is none.
func (n *testNode) receiveOne(t *testing.T, queue string) map[string]any {
	t.Helper()
	msgs := n.receive(t, queue, nil)
	if len(msgs) != 1 {
		t.Fatalf("receive from %s: %d messages, want 1", queue, len(msgs))
	}
	return msgs[0]
}

// messageState is the state GET …/messages/{id} reports ("" for a 404).
func (n *testNode) messageState(t *testing.T, queue, id string) string {
	t.Helper()
	r := n.do(t, "GET", "/v1/queues/"+queue+"/messages/"+id, nil)
	switch r.Status {
	case http.StatusNotFound:
		return ""
	case http.StatusOK:
		s, _ := r.Body["state"].(string)
		return s
	}
	t.Fatalf("GET message %s: %d %s", id, r.Status, r.Raw)
	return ""
}

func TestRetainAckedMessages(t *testing.T) {
	n := newNode(t)
	q := n.must(t, http.StatusCreated, "PUT", "/v1/queues/keep", map[string]any{"retainAckedSeconds": 3})
	if num(q["retainAckedSeconds"]) != 3 {
		t.Fatalf("queue: %v", q)
	}
	first := n.send(t, "keep", map[string]any{"body": "x", "messageId": "order-1"})
	n.send(t, "keep", map[string]any{"body": "y", "messageId": "order-2"})
	m := n.receiveOne(t, "keep")
	acked := time.Now()
	n.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": m["receiptHandle"]})

	got := n.must(t, http.StatusOK, "GET", "/v1/queues/keep/messages/order-1", nil)
	if got["state"] != "acked" || got["ackedAt"] == nil || got["visibleAt"] != nil || num(got["receiveCount"]) != 1 {
		t.Fatalf("retained message: %v", got)
	}
	// Same messageId again: a duplicate of the retained message.
	again := n.must(t, http.StatusOK, "POST", "/v1/queues/keep/messages", map[string]any{"body": "x", "messageId": "order-1"})
	if again["duplicate"] != true || again["sequence"] != first["sequence"] {
		t.Fatalf("re-send: %v, first %v", again, first)
	}
	// Its receipt is settled: a second ack, a nack, an extend are stale.
	for path, body := range map[string]map[string]any{
		"ack":        {"receiptHandle": m["receiptHandle"]},
		"nack":       {"receiptHandle": m["receiptHandle"]},
		"visibility": {"receiptHandle": m["receiptHandle"], "visibilitySeconds": 10},
		"requeue":    {"receiptHandle": m["receiptHandle"], "queue": "elsewhere"},
	} {
		wantError(t, n.do(t, "POST", "/v1/receipts/"+path, body), http.StatusNotFound, "receipt_stale")
	}
	// Never delivered again; not available nor in flight.
	second := n.receiveOne(t, "keep")
	if second["messageId"] != "order-2" {
		t.Fatalf("received %v after the ack, want order-2", second["messageId"])
	}
	if msgs := n.receive(t, "keep", map[string]any{"maxMessages": 10}); len(msgs) != 0 {
		t.Fatalf("delivered again: %v", msgs)
	}
	st := n.must(t, http.StatusOK, "GET", "/v1/queues/keep", nil)["stats"].(map[string]any)
	if num(st["acked"]) != 1 || num(st["available"]) != 0 || num(st["inFlight"]) != 1 || num(st["total"]) != 1 {
		t.Fatalf("stats: %v", st)
	}
	// Browse and search find it as acked.
	page := objects(t, n.must(t, http.StatusOK, "GET", "/v1/queues/keep/messages?state=acked", nil)["messages"])
	if len(page) != 1 || page[0]["messageId"] != "order-1" || page[0]["state"] != "acked" {
		t.Fatalf("browse state=acked: %v", page)
	}
	if ids, _ := searchIDs(t, n, "state=acked"); len(ids) != 1 || ids[0] != "order-1" {
		t.Fatalf("search state=acked: %v", ids)
	}
	if ids, _ := searchIDs(t, n, "state=in_flight"); len(ids) != 1 || ids[0] != "order-2" {
		t.Fatalf("search state=in_flight: %v", ids)
	}

	// Gone after its 3 s, within 8 s of the ack.
	eventually(t, 8*time.Second-time.Since(acked), "the retained message's removal", func() bool {
		return n.messageState(t, "keep", "order-1") == ""
	})
	st = n.must(t, http.StatusOK, "GET", "/v1/queues/keep", nil)["stats"].(map[string]any)
	if num(st["acked"]) != 0 {
		t.Fatalf("stats after the retention: %v", st)
	}
}

func TestRetainAckedSettingIsValidated(t *testing.T) {
	n := newNode(t)
	for _, v := range []any{-1, 1209601, "3"} {
		wantError(t, n.do(t, "PUT", "/v1/queues/v", map[string]any{"retainAckedSeconds": v}),
			http.StatusBadRequest, "invalid_request", "retainAckedSeconds")
	}
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/v", map[string]any{"retainAckedSeconds": 60})
	q := n.must(t, http.StatusOK, "PUT", "/v1/queues/v", map[string]any{"visibilitySeconds": 5})
	if num(q["retainAckedSeconds"]) != 60 {
		t.Fatalf("an update without it changed it: %v", q)
	}
	q = n.must(t, http.StatusOK, "PUT", "/v1/queues/v", map[string]any{"retainAckedSeconds": 0})
	if num(q["retainAckedSeconds"]) != 0 {
		t.Fatalf("set to 0: %v", q)
	}
}

// Every ack path retains: the list form, autoAck (standard and FIFO), the
// SQL consumer's skipq.ack and skipq.try_ack; a retained message can be
// deleted and is purged.
func TestRetainAckPaths(t *testing.T) {
	n := newNode(t)
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/k", map[string]any{"retainAckedSeconds": 600})
	for i := range 5 {
		n.send(t, "k", map[string]any{"body": "b", "messageId": fmt.Sprint("m", i)})
	}
	a, b := n.receiveOne(t, "k"), n.receiveOne(t, "k")
	res := n.must(t, http.StatusOK, "POST", "/v1/receipts/ack",
		map[string]any{"receiptHandles": []any{a["receiptHandle"], b["receiptHandle"], a["receiptHandle"]}})
	if num(res["succeeded"]) != 2 {
		t.Fatalf("list ack: %v", res)
	}
	auto := n.receive(t, "k", map[string]any{"autoAck": true})
	if len(auto) != 1 || auto[0]["messageId"] != "m2" || num(auto[0]["receiveCount"]) != 1 {
		t.Fatalf("autoAck: %v", auto)
	}
	c, d := n.receiveOne(t, "k"), n.receiveOne(t, "k")
	_, consumerURL := loginRole(t, n.DB, "skipq_consumer")
	consumer := connect(t, consumerURL)
	ctx := context.Background()
	if _, err := consumer.Exec(ctx, "SELECT skipq.ack($1)", c["receiptHandle"]); err != nil {
		t.Fatal(err)
	}
	var settled []string
	rows, err := consumer.Query(ctx, "SELECT * FROM skipq.try_ack($1)", []any{d["receiptHandle"], c["receiptHandle"]})
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		settled = append(settled, h)
	}
	if rows.Err() != nil || len(settled) != 1 || settled[0] != d["receiptHandle"] {
		t.Fatalf("try_ack settled %v (%v), want only the live handle", settled, rows.Err())
	}
	for i := range 5 {
		if s := n.messageState(t, "k", fmt.Sprint("m", i)); s != "acked" {
			t.Fatalf("m%d: state %q after its ack", i, s)
		}
	}
	got := n.must(t, http.StatusOK, "GET", "/v1/queues/k/messages/m2", nil)
	if num(got["receiveCount"]) != 1 || got["firstReceivedAt"] == nil {
		t.Fatalf("autoAcked message: %v", got)
	}
	st := n.must(t, http.StatusOK, "GET", "/v1/queues/k", nil)["stats"].(map[string]any)
	if num(st["acked"]) != 5 || num(st["total"]) != 0 {
		t.Fatalf("stats: %v", st)
	}
	n.must(t, http.StatusNoContent, "DELETE", "/v1/queues/k/messages/m0", nil)
	if s := n.messageState(t, "k", "m0"); s != "" {
		t.Fatalf("deleted retained message: state %q", s)
	}
	if p := n.must(t, http.StatusOK, "POST", "/v1/queues/k/purge", nil); num(p["purged"]) != 4 {
		t.Fatalf("purge: %v", p)
	}
}

// On a FIFO queue a retained message neither holds its group nor counts in
// it, and keeps its groupId.
func TestRetainAckedFIFO(t *testing.T) {
	n := newNode(t)
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/f", map[string]any{"fifo": true, "retainAckedSeconds": 600})
	for i := range 3 {
		n.send(t, "f", map[string]any{"body": "b", "messageId": fmt.Sprint("g", i), "groupId": "g"})
	}
	m := n.receiveOne(t, "f")
	n.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": m["receiptHandle"]})
	if next := n.receiveOne(t, "f"); next["messageId"] != "g1" {
		t.Fatalf("after the ack of g0: %v", next["messageId"])
	} else {
		n.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": next["receiptHandle"]})
	}
	auto := n.receive(t, "f", map[string]any{"autoAck": true})
	if len(auto) != 1 || auto[0]["messageId"] != "g2" || auto[0]["groupId"] != "g" {
		t.Fatalf("autoAck: %v", auto)
	}
	got := n.must(t, http.StatusOK, "GET", "/v1/queues/f/messages/g0", nil)
	if got["state"] != "acked" || got["groupId"] != "g" {
		t.Fatalf("retained FIFO message: %v", got)
	}
	st := n.must(t, http.StatusOK, "GET", "/v1/queues/f", nil)["stats"].(map[string]any)
	if num(st["acked"]) != 3 || num(st["groups"]) != 0 {
		t.Fatalf("stats: %v", st)
	}
	n.send(t, "f", map[string]any{"body": "b", "messageId": "g3", "groupId": "g"})
	if next := n.receiveOne(t, "f"); next["messageId"] != "g3" {
		t.Fatalf("a new message of the group: %v", next["messageId"])
	}
}

// Two nodes: the same receipt acked on both at once retains the message
// once; acks race deletes; re-sends of retained messages' ids race their
// removal (dedupWindowSeconds 0: once a message is gone its id is free), and
// every answer is a duplicate or a new message, never an error.
func TestRetainAckedConcurrently(t *testing.T) {
	dbURL := testdb.New(t)
	n1, n2 := startNode(t, dbURL), startNode(t, dbURL)
	n1.must(t, http.StatusCreated, "PUT", "/v1/queues/c", map[string]any{"retainAckedSeconds": 1, "dedupWindowSeconds": 0})
	const count = 20
	for i := range count {
		n1.send(t, "c", map[string]any{"body": "b", "messageId": fmt.Sprint("r", i)})
	}
	msgs := n1.receive(t, "c", map[string]any{"maxMessages": count})
	if len(msgs) != count {
		t.Fatalf("received %d", len(msgs))
	}
	var wg sync.WaitGroup
	wins := make([]int, count)
	var mu sync.Mutex
	for i, m := range msgs {
		for _, n := range []*testNode{n1, n2} {
			wg.Go(func() {
				r := n.do(offTest{t}, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": m["receiptHandle"]})
				if r.Status == http.StatusOK {
					mu.Lock()
					wins[i]++
					mu.Unlock()
				} else if r.Status != http.StatusNotFound {
					t.Errorf("ack: %d %s", r.Status, r.Raw)
				}
			})
		}
		if i%2 == 0 {
			wg.Go(func() {
				r := n2.do(offTest{t}, "DELETE", "/v1/queues/c/messages/"+m["messageId"].(string), nil)
				if r.Status != http.StatusNoContent && r.Status != http.StatusNotFound {
					t.Errorf("delete: %d %s", r.Status, r.Raw)
				}
			})
		}
	}
	wg.Wait()
	for i, w := range wins {
		if w > 1 || (w == 0 && i%2 == 1) {
			t.Fatalf("r%d: %d acks succeeded", i, w)
		}
	}
	// Re-send every id from both nodes until each is a new message again.
	fresh := map[string]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for len(fresh) < count {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s, %d of %d ids sent anew", len(fresh), count)
		}
		time.Sleep(50 * time.Millisecond)
		for i := range count {
			id := fmt.Sprint("r", i)
			if fresh[id] {
				continue
			}
			for _, n := range []*testNode{n1, n2} {
				r := n.do(t, "POST", "/v1/queues/c/messages", map[string]any{"body": "b", "messageId": id})
				switch {
				case r.Status == http.StatusCreated:
					fresh[id] = true
				case r.Status != http.StatusOK || r.Body["duplicate"] != true:
					t.Fatalf("re-send of %s: %d %s", id, r.Status, r.Raw)
				}
			}
		}
	}
	if msgs := n2.receive(t, "c", map[string]any{"maxMessages": count}); len(msgs) != count {
		t.Fatalf("the new messages: %d received, want %d", len(msgs), count)
	}
}
