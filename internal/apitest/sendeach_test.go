package apitest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/skipq/skipq/internal/node"
)

// sendEach posts a batch with "atomic": false and returns its entries,
// which must be one per message.
func (n *testNode) sendEach(t *testing.T, queue string, body any) []map[string]any {
	t.Helper()
	r := n.must(t, http.StatusOK, "POST", "/v1/queues/"+queue+"/messages/batch", body)
	return objects(t, r["results"])
}

// entryError is an entry's error code and issue paths ("" when it was stored).
func entryError(t *testing.T, e map[string]any) (string, []string) {
	t.Helper()
	raw, ok := e["error"]
	if !ok {
		if e["messageId"] == nil || e["sequence"] == nil {
			t.Fatalf("an entry with neither a result nor an error: %v", e)
		}
		return "", nil
	}
	detail := raw.(map[string]any)
	if detail["message"] == "" || e["messageId"] != nil {
		t.Fatalf("malformed error entry: %v", e)
	}
	var paths []string
	for _, is := range objects(t, detail["issues"]) {
		paths = append(paths, is["path"].(string))
	}
	return detail["code"].(string), paths
}

// One bad message in a non-atomic batch fails alone.
func TestSendEachOneBad(t *testing.T) {
	n := newNode(t)
	got := n.sendEach(t, "q", map[string]any{"atomic": false, "messages": []any{
		map[string]any{"body": "a"}, map[string]any{"body": "b", "delaySeconds": -5}, map[string]any{"body": "c"}}})
	if len(got) != 3 {
		t.Fatalf("%d entries, want 3: %v", len(got), got)
	}
	for i, want := range []string{"", "invalid_request", ""} {
		if code, _ := entryError(t, got[i]); code != want {
			t.Fatalf("entry %d: code %q, want %q: %v", i, code, want, got[i])
		}
	}
	if _, paths := entryError(t, got[1]); len(paths) != 1 || paths[0] != "delaySeconds" {
		t.Fatalf("issue paths %q, want [delaySeconds]", paths)
	}
	msgs := n.receive(t, "q", map[string]any{"maxMessages": 10})
	if len(msgs) != 2 || msgs[0]["body"] != "a" || msgs[1]["body"] != "c" ||
		msgs[0]["messageId"] != got[0]["messageId"] || msgs[1]["messageId"] != got[2]["messageId"] {
		t.Fatalf("stored %v; want a and c as answered", msgs)
	}
}

// Every way one message can fail -- unreadable, invalid, too large, a key
// conflict found in the database, an id held by a moved message -- fails
// that message only; a duplicate is a result, as in an atomic batch.
func TestSendEachFailuresStayPerMessage(t *testing.T) {
	n := newNode(t, func(c *node.Config) { c.Limits.MaxMessageBytes = 100 })
	n.send(t, "q", map[string]any{"body": "first", "messageId": "k1"})
	// "held" sits in q without a key of its own: moved there by requeue.
	n.send(t, "src", map[string]any{"body": "moved", "messageId": "held"})
	handle := n.receive(t, "src", nil)[0]["receiptHandle"]
	n.must(t, http.StatusOK, "POST", "/v1/receipts/requeue", map[string]any{"receiptHandle": handle, "queue": "q"})

	got := n.sendEach(t, "q", `{"atomic": false, "messages": [
		{"body": "ok1"},
		{"body": "x", "nope": 1},
		{"body": "x", "delaySeconds": "soon"},
		7,
		{"body": "`+strings.Repeat("x", 101)+`"},
		{"body": "other", "messageId": "k1"},
		{"body": "first", "messageId": "k1"},
		{"body": "x", "messageId": "held"},
		{"body": "ok2", "messageId": "k2"},
		{"body": "not ok2", "messageId": "k2"},
		{"body": "x", "maxReceiveQueue": "a", "deadLetterQueue": "b"}
	]}`)
	want := []struct{ code, path string }{
		{"", ""},
		{"invalid_request", "nope"},
		{"invalid_request", "delaySeconds"},
		{"invalid_request", ""},
		{"payload_too_large", "body"},
		{"idempotency_conflict", "messageId"},
		{"", ""},
		{"idempotency_conflict", "messageId"},
		{"", ""},
		{"idempotency_conflict", "messageId"},
		{"invalid_request", "maxReceiveQueue"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		code, paths := entryError(t, got[i])
		if code != w.code || (code != "" && (len(paths) != 1 || paths[0] != w.path)) {
			t.Fatalf("entry %d: %q at %q, want %q at %q: %v", i, code, paths, w.code, w.path, got[i])
		}
	}
	if got[6]["duplicate"] != true || got[0]["duplicate"] != false {
		t.Fatalf("duplicate flags: %v and %v", got[0], got[6])
	}
	var bodies []string
	for _, m := range n.receive(t, "q", map[string]any{"maxMessages": 10}) {
		bodies = append(bodies, m["body"].(string))
	}
	if strings.Join(bodies, ",") != "first,moved,ok1,ok2" {
		t.Fatalf("the queue holds %q; want first,moved,ok1,ok2", bodies)
	}
}

func TestSendEachFIFOGroupRule(t *testing.T) {
	n := newNode(t)
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/f", map[string]any{"fifo": true})
	got := n.sendEach(t, "f", map[string]any{"atomic": false, "messages": []any{
		map[string]any{"body": "1", "groupId": "g"}, map[string]any{"body": "2"}, map[string]any{"body": "3", "groupId": "g"}}})
	if code, paths := entryError(t, got[1]); code != "invalid_request" || len(paths) != 1 || paths[0] != "groupId" {
		t.Fatalf("entry 1: %q at %q, want invalid_request at groupId", code, paths)
	}
	for _, i := range []int{0, 2} {
		if code, _ := entryError(t, got[i]); code != "" {
			t.Fatalf("entry %d failed: %v", i, got[i])
		}
	}
	if num(got[0]["sequence"]) >= num(got[2]["sequence"]) {
		t.Fatalf("sequences out of batch order: %v", got)
	}
}

// The limits of the request as a whole fail it as in an atomic batch; a
// batch whose every message fails answers 200 and stores (and creates)
// nothing.
func TestSendEachRequestLimits(t *testing.T) {
	n := newNode(t)
	wantError(t, n.do(t, "POST", "/v1/queues/q/messages/batch", map[string]any{"atomic": false, "messages": []any{}}),
		http.StatusBadRequest, "invalid_request", "messages")
	wantError(t, n.do(t, "POST", "/v1/queues/q/messages/batch", map[string]any{"atomic": "no", "messages": []any{}}),
		http.StatusBadRequest, "invalid_request", "atomic")
	wantError(t, n.do(t, "POST", "/v1/queues/bad*name/messages/batch", map[string]any{"atomic": false,
		"messages": []any{map[string]any{"body": "x"}}}), http.StatusBadRequest, "invalid_request", "queue")
	many := make([]any, 1001)
	for i := range many {
		many[i] = map[string]any{"body": ""}
	}
	wantError(t, n.do(t, "POST", "/v1/queues/q/messages/batch", map[string]any{"atomic": false, "messages": many}),
		http.StatusBadRequest, "invalid_request", "messages")

	got := n.sendEach(t, "q", map[string]any{"atomic": false, "messages": []any{
		map[string]any{"body": ""}, map[string]any{"body": "x", "tags": map[string]any{"skipq.x": "1"}}}})
	for i, want := range []string{"body", "tags.skipq.x"} {
		if code, paths := entryError(t, got[i]); code != "invalid_request" || len(paths) != 1 || paths[0] != want {
			t.Fatalf("entry %d: %q at %q, want invalid_request at %s", i, code, paths, want)
		}
	}
	wantError(t, n.do(t, "GET", "/v1/queues/q", nil), http.StatusNotFound, "not_found")

	// "atomic": true is the default: all or nothing, 201.
	n.must(t, http.StatusCreated, "POST", "/v1/queues/q/messages/batch", map[string]any{"atomic": true,
		"messages": []any{map[string]any{"body": "x"}}})
	wantError(t, n.do(t, "POST", "/v1/queues/q/messages/batch", map[string]any{"atomic": true, "messages": []any{
		map[string]any{"body": "x"}, map[string]any{"body": "x", "delaySeconds": "soon"}}}),
		http.StatusBadRequest, "invalid_request", "messages[1].delaySeconds")
}
