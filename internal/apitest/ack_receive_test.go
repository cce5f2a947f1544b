package apitest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A receive that carries "ack" settles those handles first, in the same
// transaction as its claim, and answers how each went as the list form of
// an ack does: stale, forged, malformed and repeated handles are failed
// entries, never an error of the request (and never a 500).
func TestReceiveAcksFirst(t *testing.T) {
	n := newNode(t)
	for i := range 4 {
		n.send(t, "ar", map[string]any{"body": fmt.Sprint(i)})
	}
	first := n.receive(t, "ar", map[string]any{"maxMessages": 2})
	if len(first) != 2 {
		t.Fatalf("first receive: %v", first)
	}
	h0, h1 := first[0]["receiptHandle"].(string), first[1]["receiptHandle"].(string)
	forged := h0[:len(h0)-4] + "AAAA"
	body := n.must(t, http.StatusOK, "POST", "/v1/queues/ar/messages/receive", map[string]any{
		"maxMessages": 2, "waitSeconds": 0,
		"ack": []string{h0, h1, h1, forged, "not-a-handle", "x\x00y"},
	})
	got := objects(t, body["messages"])
	if len(got) != 2 || got[0]["body"] != "2" || got[1]["body"] != "3" {
		t.Fatalf("receive after ack: %v", got)
	}
	acked, _ := body["acked"].(map[string]any)
	failed := objects(t, acked["failed"])
	if num(acked["succeeded"]) != 2 || len(failed) != 4 {
		t.Fatalf("acked: %v, want 2 succeeded and 4 failed", acked)
	}
	for _, f := range failed {
		if f["code"] != "receipt_stale" {
			t.Fatalf("failed entry %v: want receipt_stale", f)
		}
	}
	// Acked: gone, not back after their lease.
	st := n.must(t, http.StatusOK, "GET", "/v1/queues/ar", nil)["stats"].(map[string]any)
	if num(st["total"]) != 2 || num(st["inFlight"]) != 2 {
		t.Fatalf("stats: %v, want the two received ones in flight and nothing else", st)
	}

	// Acking the same handles again: all stale, and the receive still
	// answers (empty: both others are in flight).
	body = n.must(t, http.StatusOK, "POST", "/v1/queues/ar/messages/receive", map[string]any{
		"waitSeconds": 0, "ack": []string{h0, h1}})
	if acked := body["acked"].(map[string]any); num(acked["succeeded"]) != 0 || len(objects(t, acked["failed"])) != 2 {
		t.Fatalf("second ack: %v", acked)
	}
	if len(objects(t, body["messages"])) != 0 {
		t.Fatalf("messages: %v", body["messages"])
	}

	// An empty list acks nothing and says so; no "ack" answers without "acked".
	body = n.must(t, http.StatusOK, "POST", "/v1/queues/ar/messages/receive", map[string]any{"waitSeconds": 0, "ack": []string{}})
	if acked := body["acked"].(map[string]any); num(acked["succeeded"]) != 0 || len(objects(t, acked["failed"])) != 0 {
		t.Fatalf("empty ack: %v", acked)
	}
	body = n.must(t, http.StatusOK, "POST", "/v1/queues/ar/messages/receive", map[string]any{"waitSeconds": 0})
	if _, ok := body["acked"]; ok {
		t.Fatalf("a receive without ack answered acked: %v", body)
	}

	// A receive that waits still acks at once: a long-poll's handles are
	// settled before it parks.
	h2 := got[0]["receiptHandle"].(string)
	wait := n.receiveAsync(t, "ar", map[string]any{"waitSeconds": 20, "ack": []string{h2}})
	eventually(t, 5*time.Second, "the ack before the wait", func() bool {
		st := n.must(t, http.StatusOK, "GET", "/v1/queues/ar", nil)["stats"].(map[string]any)
		return num(st["total"]) == 1
	})
	n.send(t, "ar", map[string]any{"body": "4"})
	if msgs := <-wait; len(msgs) != 1 || msgs[0]["body"] != "4" {
		t.Fatalf("woken receive: %v", msgs)
	}
}

// Bad "ack" fields are 400s at their path, and nothing is acked or claimed.
func TestReceiveAckValidation(t *testing.T) {
	n := newNode(t)
	n.send(t, "av", map[string]any{"body": "x"})
	h := n.receive(t, "av", map[string]any{"visibilitySeconds": 1})[0]["receiptHandle"].(string)
	tooMany := make([]string, 1025)
	for i := range tooMany {
		tooMany[i] = h
	}
	for _, c := range []struct {
		body any
		path string
	}{
		{map[string]any{"ack": tooMany}, "ack"},
		{map[string]any{"ack": "one"}, "ack"},
		{map[string]any{"ack": []any{1}}, "ack[0]"},
		{map[string]any{"ack": []string{h}, "maxMessages": 0}, "maxMessages"},
	} {
		r := n.do(t, "POST", "/v1/queues/av/messages/receive", c.body)
		if r.Status != http.StatusBadRequest {
			t.Fatalf("%v: status %d, want 400: %s", c.body, r.Status, r.Raw)
		}
		_, issues := errorCode(t, r)
		if len(issues) == 0 || !strings.HasPrefix(issues[0]["path"].(string), c.path) {
			t.Fatalf("%v: issues %v, want path %s", c.body, issues, c.path)
		}
	}
	st := n.must(t, http.StatusOK, "GET", "/v1/queues/av", nil)["stats"].(map[string]any)
	if num(st["total"]) != 1 {
		t.Fatalf("a refused receive acked: %v", st)
	}
}

// On a FIFO queue the claim sees what the ack before it freed: acking a
// group's message in the receive gets the group's next one in that same
// request.
func TestReceiveAckFreesTheGroupForItsClaim(t *testing.T) {
	n := newNode(t)
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/ar.fifo", map[string]any{"fifo": true})
	for i := range 2 {
		n.send(t, "ar.fifo", map[string]any{"body": fmt.Sprint(i), "groupId": "g"})
	}
	first := n.receive(t, "ar.fifo", nil)
	if len(first) != 1 || first[0]["body"] != "0" {
		t.Fatalf("first: %v", first)
	}
	if held := n.receive(t, "ar.fifo", nil); len(held) != 0 {
		t.Fatalf("the group was handed out while its head is in flight: %v", held)
	}
	body := n.must(t, http.StatusOK, "POST", "/v1/queues/ar.fifo/messages/receive", map[string]any{
		"waitSeconds": 0, "ack": []string{first[0]["receiptHandle"].(string)}})
	if got := objects(t, body["messages"]); len(got) != 1 || got[0]["body"] != "1" {
		t.Fatalf("after acking the head in the receive: %v", body)
	}
	if acked := body["acked"].(map[string]any); num(acked["succeeded"]) != 1 {
		t.Fatalf("acked: %v", acked)
	}
}
