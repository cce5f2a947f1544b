package apitest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/skipq/skipq/internal/node"
)

// Message history (docs/API.md#history), over HTTP with auth on: the
// events carry the key of the request that caused them.
func TestHistoryOverHTTP(t *testing.T) {
	n := newNode(t, func(c *node.Config) { c.Auth = "required" })
	pool := newPool(t, n.DB)
	key, secret := createKey(t, pool, "acme", "admin")
	auth := []string{"Authorization", "Bearer " + secret}
	call := func(want int, method, path string, body any) map[string]any {
		t.Helper()
		r := n.do(t, method, path, body, auth...)
		if r.Status != want {
			t.Fatalf("%s %s: %d, want %d: %s", method, path, r.Status, want, r.Raw)
		}
		return r.Body
	}
	q := call(http.StatusCreated, "PUT", "/v1/queues/h", map[string]any{"trace": true, "maxReceiveCount": 2, "deadLetterQueue": "h.dlq"})
	if q["trace"] != true {
		t.Fatalf("queue: %v", q)
	}
	call(http.StatusCreated, "PUT", "/v1/queues/h.dlq", map[string]any{})
	call(http.StatusCreated, "POST", "/v1/queues/h/messages", map[string]any{"body": "x", "messageId": "m1"})
	receive := func(queue string) map[string]any {
		t.Helper()
		msgs := objects(t, call(http.StatusOK, "POST", "/v1/queues/"+queue+"/messages/receive",
			map[string]any{"waitSeconds": 0})["messages"])
		if len(msgs) != 1 {
			t.Fatalf("receive from %s: %v", queue, msgs)
		}
		return msgs[0]
	}
	m := receive("h")
	call(http.StatusOK, "POST", "/v1/receipts/visibility", map[string]any{"receiptHandle": m["receiptHandle"], "visibilitySeconds": 120})
	call(http.StatusOK, "POST", "/v1/receipts/nack", map[string]any{"receiptHandle": m["receiptHandle"], "reason": "first"})
	m = receive("h")
	call(http.StatusOK, "POST", "/v1/receipts/nack", map[string]any{"receiptHandle": m["receiptHandle"], "reason": "second"})
	dead := objects(t, call(http.StatusOK, "GET", "/v1/dlq", nil)["messages"])
	if len(dead) != 1 {
		t.Fatalf("dlq: %v", dead)
	}
	redriven := call(http.StatusOK, "POST", "/v1/queues/h.dlq/messages/"+dead[0]["messageId"].(string)+"/redrive", map[string]any{})
	newID := redriven["redrivenAs"].(map[string]any)["messageId"].(string)

	want := "sent@h received@h extended@h nacked@h received@h nacked@h dead_lettered@h redriven@h.dlq"
	for _, at := range []string{"/v1/queues/h/messages/" + newID, "/v1/queues/h/messages/m1", "/v1/queues/h.dlq/messages/" + dead[0]["messageId"].(string)} {
		events := objects(t, call(http.StatusOK, "GET", at+"/history", nil)["events"])
		words := make([]string, len(events))
		for i, e := range events {
			words[i] = e["type"].(string) + "@" + e["queue"].(string)
			if num(e["keyId"]) != key.ID {
				t.Errorf("%s event %d %s: keyId %v, want %d", at, i, e["type"], e["keyId"], key.ID)
			}
		}
		if got := strings.Join(words, " "); got != want {
			t.Fatalf("%s/history:\n got %s\nwant %s", at, got, want)
		}
		if e := events[6]; e["toQueue"] != "h.dlq" || e["cause"] != "nack" || e["reason"] != "second" {
			t.Errorf("dead_lettered: %v", e)
		}
		if e := events[7]; e["toQueue"] != "h" || e["newMessageId"] != newID {
			t.Errorf("redriven: %v", e)
		}
		if _, ok := events[0]["reason"]; ok {
			t.Errorf("sent carries reason: %v", events[0])
		}
	}

	// Untraced: an existing message has no events; one that never existed,
	// and another tenant's, are 404.
	call(http.StatusCreated, "PUT", "/v1/queues/plain", map[string]any{})
	call(http.StatusCreated, "POST", "/v1/queues/plain/messages", map[string]any{"body": "x", "messageId": "p1"})
	if events := call(http.StatusOK, "GET", "/v1/queues/plain/messages/p1/history", nil)["events"]; events == nil || len(events.([]any)) != 0 {
		t.Fatalf("untraced: %v", events)
	}
	wantError(t, n.do(t, "GET", "/v1/queues/plain/messages/nope/history", nil, auth...), http.StatusNotFound, "not_found")
	_, other := createKey(t, pool, "other", "read")
	wantError(t, n.do(t, "GET", "/v1/queues/h/messages/m1/history", nil, "Authorization", "Bearer "+other),
		http.StatusNotFound, "not_found")
	wantError(t, n.do(t, "GET", "/v1/queues/h/messages/m1/history?x=1", nil, auth...), http.StatusBadRequest, "invalid_request", "x")
}
