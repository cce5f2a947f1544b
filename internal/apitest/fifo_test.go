package apitest

import (
	"fmt"
	"net/http"
	"testing"
)

// FIFO queues' bad input (docs/FIFO.md) and the issue's: each is a 400 at its path,
// and nothing is stored.
func TestFIFOTypesAndBadInput(t *testing.T) {
	n := newNode(t)
	q := n.must(t, http.StatusCreated, "PUT", "/v1/queues/orders.fifo", map[string]any{"fifo": true})
	if q["fifo"] != true {
		t.Fatalf("created %v, want fifo true", q)
	}
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/plain", nil)

	// fifo is fixed at creation; the other settings of a refused update are
	// not applied either.
	wantError(t, n.do(t, "PUT", "/v1/queues/orders.fifo", map[string]any{"fifo": false, "delaySeconds": 7}),
		http.StatusBadRequest, "invalid_request", "fifo")
	wantError(t, n.do(t, "PUT", "/v1/queues/plain", map[string]any{"fifo": true}), http.StatusBadRequest, "invalid_request", "fifo")
	if q := n.must(t, http.StatusOK, "GET", "/v1/queues/orders.fifo", nil); q["fifo"] != true || num(q["delaySeconds"]) != 0 {
		t.Fatalf("after refused updates: %v", q)
	}
	n.must(t, http.StatusOK, "PUT", "/v1/queues/orders.fifo", map[string]any{"fifo": true, "visibilitySeconds": 30})
	// A FIFO queue's dead-letter queue must be FIFO.
	wantError(t, n.do(t, "PUT", "/v1/queues/orders.fifo", map[string]any{"deadLetterQueue": "plain"}),
		http.StatusBadRequest, "invalid_request", "deadLetterQueue")

	wantError(t, n.do(t, "POST", "/v1/queues/plain/messages", map[string]any{"body": "x", "groupId": "g"}),
		http.StatusBadRequest, "invalid_request", "groupId")
	wantError(t, n.do(t, "POST", "/v1/queues/orders.fifo/messages", map[string]any{"body": "x"}),
		http.StatusBadRequest, "invalid_request", "groupId")
	wantError(t, n.do(t, "POST", "/v1/queues/orders.fifo/messages/batch", map[string]any{"messages": []any{
		map[string]any{"body": "x", "groupId": "g"}, map[string]any{"body": "y"}}}),
		http.StatusBadRequest, "invalid_request", "messages[1].groupId")
	wantError(t, n.do(t, "POST", "/v1/queues/orders.fifo/messages", map[string]any{"body": "x", "groupId": "no spaces"}),
		http.StatusBadRequest, "invalid_request", "groupId")
	var many []any
	for i := range 65 {
		many = append(many, map[string]any{"body": "x", "groupId": fmt.Sprint("g", i)})
	}
	wantError(t, n.do(t, "POST", "/v1/queues/orders.fifo/messages/batch", map[string]any{"messages": many}),
		http.StatusBadRequest, "invalid_request", "messages")
	wantError(t, n.do(t, "POST", "/v1/queues/orders.fifo/messages/receive", map[string]any{"maxMessagesPerGroup": 11}),
		http.StatusBadRequest, "invalid_request", "maxMessagesPerGroup")
	for _, queue := range []string{"plain", "orders.fifo"} {
		st := n.must(t, http.StatusOK, "GET", "/v1/queues/"+queue, nil)["stats"].(map[string]any)
		if num(st["total"]) != 0 || num(st["groups"]) != 0 {
			t.Fatalf("%s after refused sends: %v", queue, st)
		}
	}

	// A send with a groupId creates a FIFO queue; one without, a standard one.
	res := n.must(t, http.StatusCreated, "POST", "/v1/queues/auto.fifo/messages", map[string]any{"body": "x", "groupId": "g"})
	if res["messageId"] == nil {
		t.Fatalf("send: %v", res)
	}
	if q := n.must(t, http.StatusOK, "GET", "/v1/queues/auto.fifo", nil); q["fifo"] != true ||
		num(q["stats"].(map[string]any)["groups"]) != 1 {
		t.Fatalf("auto-created by a grouped send: %v", q)
	}
	got := n.receive(t, "auto.fifo", map[string]any{"maxMessagesPerGroup": 2})
	if len(got) != 1 || got[0]["groupId"] != "g" {
		t.Fatalf("received %v", got)
	}
	n.send(t, "auto.plain", map[string]any{"body": "x"})
	if q := n.must(t, http.StatusOK, "GET", "/v1/queues/auto.plain", nil); q["fifo"] != false {
		t.Fatalf("auto-created by a plain send: %v", q)
	}
	if m := n.receive(t, "auto.plain", nil); len(m) != 1 || m[0]["groupId"] != nil {
		t.Fatalf("a standard queue's message: %v", m)
	}

	// Requeue between the two types is refused, and the message stays.
	r := n.do(t, "POST", "/v1/receipts/requeue", map[string]any{"receiptHandle": got[0]["receiptHandle"], "queue": "plain"})
	wantError(t, r, http.StatusConflict, "queue_type_mismatch")
	n.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": got[0]["receiptHandle"]})
}

// An ack that frees a group wakes a receiver already waiting on another
// node for the group's next message. Each round's receive waits 2 s, which
// only a wake-up meets reliably: without one, the message would reach it
// through the hub's safety recheck (every 5 s while the listener is up),
// which three rounds in a row cannot all meet by chance.
func TestFIFOAckWakesAWaitingReceiver(t *testing.T) {
	a := newNode(t)
	b := startNode(t, a.DB)
	a.must(t, http.StatusCreated, "PUT", "/v1/queues/w", map[string]any{"fifo": true})
	const rounds = 3
	for i := range rounds + 1 {
		a.send(t, "w", map[string]any{"body": fmt.Sprint(i), "groupId": "g"})
	}
	held := a.receive(t, "w", nil)
	for i := range rounds {
		if len(held) != 1 || held[0]["body"] != fmt.Sprint(i) {
			t.Fatalf("round %d: holding %v", i, held)
		}
		waiting := b.receiveAsync(t, "w", map[string]any{"waitSeconds": 2})
		waitForWaiters(t, b)
		a.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": held[0]["receiptHandle"]})
		if held = <-waiting; len(held) != 1 || held[0]["body"] != fmt.Sprint(i+1) {
			t.Fatalf("round %d: the waiting receive got %v, want message %d", i, held, i+1)
		}
	}
}
