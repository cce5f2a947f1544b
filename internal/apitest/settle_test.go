package apitest

import (
	"context"
	"net/http"
	"testing"
	"time"
)

func TestAckNackAndStaleReceipts(t *testing.T) {
	n := newNode(t)
	n.send(t, "s", map[string]any{"body": "x"})
	first := n.receive(t, "s", nil)[0]
	n.must(t, http.StatusOK, "POST", "/v1/receipts/nack", map[string]any{"receiptHandle": first["receiptHandle"]})
	// Nacked: available again at once, as the second delivery.
	second := n.receive(t, "s", nil)
	if len(second) != 1 || num(second[0]["receiveCount"]) != 2 || second[0]["firstReceivedAt"] != first["firstReceivedAt"] {
		t.Fatalf("after nack: %v", second)
	}
	// The first delivery's handle is stale now.
	for _, route := range []string{"ack", "nack", "requeue"} {
		body := map[string]any{"receiptHandle": first["receiptHandle"]}
		if route == "requeue" {
			body["queue"] = "elsewhere"
		}
		wantError(t, n.do(t, "POST", "/v1/receipts/"+route, body), http.StatusNotFound, "receipt_stale")
	}
	wantError(t, n.do(t, "POST", "/v1/receipts/visibility", map[string]any{"receiptHandle": first["receiptHandle"], "visibilitySeconds": 5}), http.StatusNotFound, "receipt_stale")
	n.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": second[0]["receiptHandle"]})
	wantError(t, n.do(t, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": second[0]["receiptHandle"]}), http.StatusNotFound, "receipt_stale")
	if got := n.receive(t, "s", map[string]any{"isPeek": true}); len(got) != 0 {
		t.Fatalf("acked message still there: %v", got)
	}
}

func TestForgedAndMalformedReceipts(t *testing.T) {
	n := newNode(t)
	n.send(t, "f", map[string]any{"body": "x"})
	m := n.receive(t, "f", nil)[0]
	h := m["receiptHandle"].(string)
	// Same message key, different token.
	forged := h[:len(h)-4] + "AAAA"
	if forged == h {
		forged = h[:len(h)-4] + "BBBB"
	}
	for _, bad := range []string{forged, "garbage", "////", h + "A"} {
		wantError(t, n.do(t, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": bad}), http.StatusNotFound, "receipt_stale")
	}
	for _, body := range []any{
		map[string]any{},
		map[string]any{"receiptHandle": h, "receiptHandles": []string{h}},
		map[string]any{"receiptHandles": []string{}},
		map[string]any{"receiptHandle": ""},
		`{"receiptHandle": 5}`,
		`not json`,
	} {
		wantError(t, n.do(t, "POST", "/v1/receipts/ack", body), http.StatusBadRequest, "invalid_request")
	}
	wantError(t, n.do(t, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": h, "queue": "x"}), http.StatusBadRequest, "invalid_request", "queue")
	wantError(t, n.do(t, "POST", "/v1/receipts/visibility", map[string]any{"receiptHandle": h}), http.StatusBadRequest, "invalid_request", "visibilitySeconds")
	wantError(t, n.do(t, "POST", "/v1/receipts/visibility", map[string]any{"receiptHandle": h, "visibilitySeconds": 43201}), http.StatusBadRequest, "invalid_request", "visibilitySeconds")
	wantError(t, n.do(t, "POST", "/v1/receipts/requeue", map[string]any{"receiptHandle": h}), http.StatusBadRequest, "invalid_request", "queue")
	wantError(t, n.do(t, "POST", "/v1/receipts/requeue", map[string]any{"receiptHandle": h, "queue": "bad."}), http.StatusBadRequest, "invalid_request", "queue")
	// None of that settled it.
	n.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": h})
}

func TestSettleListForm(t *testing.T) {
	n := newNode(t)
	for range 3 {
		n.send(t, "l", map[string]any{"body": "x"})
	}
	msgs := n.receive(t, "l", map[string]any{"maxMessages": 3})
	handles := []any{msgs[0]["receiptHandle"], msgs[1]["receiptHandle"], "forged"}
	body := n.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandles": handles})
	failed := objects(t, body["failed"])
	if num(body["succeeded"]) != 2 || len(failed) != 1 || failed[0]["receiptHandle"] != "forged" || failed[0]["code"] != "receipt_stale" || failed[0]["message"] == "" {
		t.Fatalf("list ack: %v", body)
	}
	body = n.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandles": handles[:2]})
	if num(body["succeeded"]) != 0 || len(objects(t, body["failed"])) != 2 {
		t.Fatalf("second list ack: %v", body)
	}
	body = n.must(t, http.StatusOK, "POST", "/v1/receipts/visibility", map[string]any{"receiptHandles": []any{msgs[2]["receiptHandle"]}, "visibilitySeconds": 100})
	if num(body["succeeded"]) != 1 {
		t.Fatalf("list visibility: %v", body)
	}
}

func TestVisibilityExtendAndRelease(t *testing.T) {
	n := newNode(t)
	n.send(t, "v", map[string]any{"body": "x"})
	m := n.receive(t, "v", map[string]any{"visibilitySeconds": 5})[0]
	h := m["receiptHandle"]
	body := n.must(t, http.StatusOK, "POST", "/v1/receipts/visibility", map[string]any{"receiptHandle": h, "visibilitySeconds": 600})
	if body["visibleUntil"] == nil || body["visibleUntil"].(string) <= m["visibleUntil"].(string) {
		t.Fatalf("extended lease ends %v, before it ended %v", body["visibleUntil"], m["visibleUntil"])
	}
	if got := n.receive(t, "v", nil); len(got) != 0 {
		t.Fatalf("an extended lease was delivered again: %v", got)
	}
	// Release: a nack. Visible at once, and the handle is stale.
	body = n.must(t, http.StatusOK, "POST", "/v1/receipts/visibility", map[string]any{"receiptHandle": h, "visibilitySeconds": 0})
	if body["visibleUntil"] == nil {
		t.Fatalf("release answered %v", body)
	}
	wantError(t, n.do(t, "POST", "/v1/receipts/visibility", map[string]any{"receiptHandle": h, "visibilitySeconds": 60}), http.StatusNotFound, "receipt_stale")
	again := n.receive(t, "v", nil)
	if len(again) != 1 || num(again[0]["receiveCount"]) != 2 {
		t.Fatalf("released message: %v", again)
	}
	wantError(t, n.do(t, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": h}), http.StatusNotFound, "receipt_stale")
}

func TestReleaseOfLastDeliveryDeadLettersAtOnce(t *testing.T) {
	n := newNode(t)
	n.send(t, "last", map[string]any{"body": "x", "maxReceiveCount": 1, "deadLetterQueue": "last.dlq"})
	m := n.receive(t, "last", nil)[0]
	n.must(t, http.StatusOK, "POST", "/v1/receipts/visibility", map[string]any{"receiptHandle": m["receiptHandle"], "visibilitySeconds": 0})
	if got := n.receive(t, "last.dlq", nil); len(got) != 1 || got[0]["reRoutedFrom"] != "last" {
		t.Fatalf("dead-letter queue right after the release: %v", got)
	}
}

func TestQueueVisibilityMustBePositive(t *testing.T) {
	n := newNode(t)
	wantError(t, n.do(t, "PUT", "/v1/queues/q", map[string]any{"visibilitySeconds": 0}), http.StatusBadRequest, "invalid_request", "visibilitySeconds")
}

func TestRequeue(t *testing.T) {
	n := newNode(t)
	n.send(t, "src", map[string]any{"body": "x", "messageId": "m1", "tags": map[string]any{"a": "1"}, "clientId": "c", "metadata": "meta"})
	m := n.receive(t, "src", nil)[0]
	n.must(t, http.StatusOK, "POST", "/v1/receipts/requeue", map[string]any{"receiptHandle": m["receiptHandle"], "queue": "dst"})
	if got := n.receive(t, "src", map[string]any{"isPeek": true}); len(got) != 0 {
		t.Fatalf("requeued message still in source: %v", got)
	}
	got := n.receive(t, "dst", nil)
	if len(got) != 1 {
		t.Fatalf("destination holds %v", got)
	}
	d := got[0]
	if d["messageId"] != "m1" || d["reRoutedFrom"] != "src" || num(d["receiveCount"]) != 1 || d["body"] != "x" ||
		d["clientId"] != "c" || d["metadata"] != "meta" || d["tags"].(map[string]any)["a"] != "1" || d["firstReceivedAt"] == m["firstReceivedAt"] {
		t.Fatalf("requeued message: %v", d)
	}
	wantError(t, n.do(t, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": m["receiptHandle"]}), http.StatusNotFound, "receipt_stale")
	// Back into a queue where the id is taken: it gets a new server id.
	n.send(t, "src", map[string]any{"body": "y", "messageId": "m1x"})
	n.send(t, "dst2", map[string]any{"body": "z", "messageId": "m1"})
	n.must(t, http.StatusOK, "POST", "/v1/receipts/requeue", map[string]any{"receiptHandle": d["receiptHandle"], "queue": "dst2"})
	moved := n.receive(t, "dst2", map[string]any{"maxMessages": 10})
	if len(moved) != 2 || moved[1]["messageId"] == "m1" || moved[1]["reRoutedFrom"] != "dst" {
		t.Fatalf("collision: %v", moved)
	}
}

// Dead-lettering moves the message whole (messageId, body, metadata, tags,
// clientId, sentAt) and resets its delivery state and policies to the
// dead-letter queue's defaults (docs/API.md#model): here a delay, an expiry, a
// delivery limit and a dead-letter queue of its own, none of them the
// source's or the message's.
func TestDeadLetterAfterNacks(t *testing.T) {
	n := newNode(t)
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/work", map[string]any{"maxReceiveCount": 3, "deadLetterQueue": "work.dlq"})
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/work.dlq", map[string]any{
		"delaySeconds": 30, "expirationSeconds": 100, "maxReceiveCount": 5, "deadLetterQueue": "work.dlq2"})
	sent := n.send(t, "work", map[string]any{"body": "poison", "messageId": "p1", "tags": map[string]any{"t": "v"},
		"metadata": "meta", "clientId": "client-1", "expirationSeconds": 3600})
	for i := 1; i <= 3; i++ {
		got := n.receive(t, "work", nil)
		if len(got) != 1 || num(got[0]["receiveCount"]) != int64(i) {
			t.Fatalf("delivery %d: %v", i, got)
		}
		n.must(t, http.StatusOK, "POST", "/v1/receipts/nack", map[string]any{"receiptHandle": got[0]["receiptHandle"]})
	}
	if got := n.receive(t, "work", nil); len(got) != 0 {
		t.Fatalf("a fourth delivery: %v", got)
	}
	wantError(t, n.do(t, "GET", "/v1/queues/work/messages/p1", nil), http.StatusNotFound, "not_found")
	d := n.must(t, http.StatusOK, "GET", "/v1/queues/work.dlq/messages/p1", nil)
	if d["reRoutedFrom"] != "work" || d["deadLetteredAt"] == nil || num(d["receiveCount"]) != 0 || d["firstReceivedAt"] != nil ||
		d["body"] != "poison" || d["metadata"] != "meta" || d["clientId"] != "client-1" || d["sentAt"] != sent["sentAt"] ||
		len(d["tags"].(map[string]any)) != 1 || d["tags"].(map[string]any)["t"] != "v" {
		t.Fatalf("dead-lettered message: %v", d)
	}
	// The dead-letter queue's delay and expiry, counted from the move.
	deadLettered, delayed, expires := parseTime(t, d["deadLetteredAt"]), parseTime(t, d["delayedTo"]), parseTime(t, d["expiresAt"])
	if d["state"] != "delayed" || delayed.Sub(deadLettered) != 30*time.Second || expires.Sub(delayed) != 100*time.Second {
		t.Fatalf("dead-lettered message: state %v, deadLetteredAt %v, delayedTo %v, expiresAt %v; want delayed 30 s, then 100 s to expiry",
			d["state"], deadLettered, delayed, expires)
	}
	var max int
	var dlq string
	if err := connect(t, n.DB).QueryRow(context.Background(),
		"SELECT max_receive_count, dead_letter_queue FROM skipq.messages WHERE message_id = 'p1'").Scan(&max, &dlq); err != nil {
		t.Fatal(err)
	}
	if max != 5 || dlq != "work.dlq2" {
		t.Fatalf("dead-lettered message: maxReceiveCount %d, deadLetterQueue %q; want the dead-letter queue's 5 and work.dlq2", max, dlq)
	}
}

func TestDiscardWithoutDeadLetterQueue(t *testing.T) {
	n := newNode(t)
	n.send(t, "once", map[string]any{"body": "x", "maxReceiveCount": 1})
	m := n.receive(t, "once", nil)[0]
	n.must(t, http.StatusOK, "POST", "/v1/receipts/nack", map[string]any{"receiptHandle": m["receiptHandle"]})
	if got := n.receive(t, "once", map[string]any{"isPeek": true}); len(got) != 0 {
		t.Fatalf("discarded message still there: %v", got)
	}
	st := n.must(t, http.StatusOK, "GET", "/v1/queues/once", nil)["stats"].(map[string]any)
	if num(st["total"]) != 0 {
		t.Fatalf("stats: %v", st)
	}
}
