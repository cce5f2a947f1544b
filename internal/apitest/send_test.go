package apitest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/skipq/skipq/internal/node"
)

func TestSendAndReceiveFields(t *testing.T) {
	n := newNode(t)
	res := n.send(t, "auto.created", map[string]any{
		"body": "hello", "metadata": "m", "tags": map[string]any{"k": "v"}, "clientId": "c1", "messageId": "order-7",
	})
	if res["messageId"] != "order-7" || num(res["sequence"]) < 1 || res["duplicate"] != false ||
		res["delayedTo"] != nil || res["expiresAt"] != nil || !strings.HasSuffix(res["sentAt"].(string), "Z") {
		t.Fatalf("send result: %v", res)
	}
	msgs := n.receive(t, "auto.created", nil)
	if len(msgs) != 1 {
		t.Fatalf("received %v", msgs)
	}
	m := msgs[0]
	for k, want := range map[string]any{"messageId": "order-7", "queue": "auto.created", "body": "hello", "bodyEncoding": "text",
		"metadata": "m", "clientId": "c1", "receiveCount": 1.0, "reRoutedFrom": nil, "deadLetteredAt": nil} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	if m["tags"].(map[string]any)["k"] != "v" || m["receiptHandle"] == nil || m["visibleUntil"] == nil || m["firstReceivedAt"] == nil {
		t.Fatalf("message: %v", m)
	}
	if m["sentAt"] != res["sentAt"] || m["sequence"] != res["sequence"] {
		t.Fatalf("sentAt/sequence differ between send and receive: %v vs %v", m, res)
	}
}

func TestSendBinaryBody(t *testing.T) {
	n := newNode(t)
	raw := []byte{0, 1, 2, 255, 254}
	enc := base64.StdEncoding.EncodeToString(raw)
	n.send(t, "bin", map[string]any{"body": enc, "bodyEncoding": "base64"})
	m := n.receive(t, "bin", nil)[0]
	if m["body"] != enc || m["bodyEncoding"] != "base64" {
		t.Fatalf("binary body came back as %v (%v)", m["body"], m["bodyEncoding"])
	}
	r := n.do(t, "POST", "/v1/queues/bin/messages", map[string]any{"body": "%%%", "bodyEncoding": "base64"})
	wantError(t, r, http.StatusBadRequest, "invalid_request", "body")
	r = n.do(t, "POST", "/v1/queues/bin/messages", map[string]any{"body": "x", "bodyEncoding": "hex"})
	wantError(t, r, http.StatusBadRequest, "invalid_request", "bodyEncoding")
}

func TestSendValidation(t *testing.T) {
	n := newNode(t)
	tooManyTags := map[string]any{}
	for i := range 33 {
		tooManyTags[fmt.Sprintf("t%d", i)] = "v"
	}
	cases := []struct {
		name string
		body any
		path string
	}{
		{"no body nor metadata", map[string]any{}, "body"},
		{"metadata alone is fine, body empty string is not enough", map[string]any{"body": ""}, "body"},
		{"bad message id", map[string]any{"body": "x", "messageId": "has space"}, "messageId"},
		{"long message id", map[string]any{"body": "x", "messageId": strings.Repeat("a", 129)}, "messageId"},
		{"negative delay", map[string]any{"body": "x", "delaySeconds": -1}, "delaySeconds"},
		{"delay too long", map[string]any{"body": "x", "delaySeconds": 43201}, "delaySeconds"},
		{"expiration too long", map[string]any{"body": "x", "expirationSeconds": 1209601}, "expirationSeconds"},
		{"receive count too high", map[string]any{"body": "x", "maxReceiveCount": 1025}, "maxReceiveCount"},
		{"bad dead-letter queue", map[string]any{"body": "x", "deadLetterQueue": "a b"}, "deadLetterQueue"},
		{"reserved tag key", map[string]any{"body": "x", "tags": map[string]any{"skipq.x": "v"}}, "tags.skipq.x"},
		{"bad tag key", map[string]any{"body": "x", "tags": map[string]any{"a b": "v"}}, "tags.a b"},
		{"long tag value", map[string]any{"body": "x", "tags": map[string]any{"k": strings.Repeat("v", 1025)}}, "tags.k"},
		{"too many tags", map[string]any{"body": "x", "tags": tooManyTags}, "tags"},
		{"wrong type", map[string]any{"body": "x", "delaySeconds": "5"}, "delaySeconds"},
		{"fraction", map[string]any{"body": "x", "delaySeconds": 1.5}, "delaySeconds"},
		{"unknown field", map[string]any{"body": "x", "priority": 1}, "priority"},
		{"tag value not a string", map[string]any{"body": "x", "tags": map[string]any{"k": 1}}, "tags.k"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantError(t, n.do(t, "POST", "/v1/queues/q/messages", c.body), http.StatusBadRequest, "invalid_request", c.path)
		})
	}
	n.must(t, http.StatusCreated, "POST", "/v1/queues/q/messages", map[string]any{"metadata": "only metadata"})
	wantError(t, n.do(t, "POST", "/v1/queues/bad.*/messages", map[string]any{"body": "x"}), http.StatusBadRequest, "invalid_request", "queue")
}

func TestSendMediaTypeAndSizes(t *testing.T) {
	n := newNode(t, func(c *node.Config) {
		c.MaxRequestBytes = 4096
		c.Limits.MaxMessageBytes = 100
	})
	r := n.do(t, "POST", "/v1/queues/q/messages", `{"body":"x"}`, "Content-Type", "text/plain")
	wantError(t, r, http.StatusUnsupportedMediaType, "unsupported_media_type")
	if r := n.do(t, "POST", "/v1/queues/q/messages", `{"body":"x"}`, "Content-Type", "application/json; charset=utf-8"); r.Status != http.StatusCreated {
		t.Fatalf("application/json with a charset: %d %s", r.Status, r.Raw)
	}

	// A request over SKIPQ_MAX_REQUEST_BYTES whose every message is within
	// SKIPQ_MAX_MESSAGE_BYTES: only the request limit can refuse it, with
	// Content-Length (at once) and chunked (while reading).
	var small []any
	for range 50 {
		small = append(small, map[string]any{"body": strings.Repeat("x", 90)})
	}
	over, err := json.Marshal(map[string]any{"messages": small})
	if err != nil || len(over) <= 4096 {
		t.Fatalf("the batch is %d bytes (%v); want more than 4096", len(over), err)
	}
	requestTooLarge := func(r response) {
		t.Helper()
		wantError(t, r, http.StatusRequestEntityTooLarge, "payload_too_large")
		if _, issues := errorCode(t, r); len(issues) != 0 {
			t.Fatalf("refused for a message, not for the request: %s", r.Raw)
		}
	}
	requestTooLarge(n.do(t, "POST", "/v1/queues/q/messages/batch", string(over)))
	req, err := http.NewRequest("POST", n.URL+"/v1/queues/q/messages/batch", io.MultiReader(bytes.NewReader(over))) // no length: chunked
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	chunked := response{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	if err := json.Unmarshal(raw, &chunked.Body); err != nil {
		t.Fatalf("chunked oversized request: %d %q", resp.StatusCode, raw)
	}
	requestTooLarge(chunked)
	if msgs := n.receive(t, "q", map[string]any{"maxMessages": 100, "isPeek": true}); len(msgs) != 1 {
		t.Fatalf("the queue holds %d messages; want only the charset one", len(msgs))
	}
	r = n.do(t, "POST", "/v1/queues/q/messages", map[string]any{"body": strings.Repeat("x", 60), "metadata": strings.Repeat("m", 41)})
	wantError(t, r, http.StatusRequestEntityTooLarge, "payload_too_large", "body")
	r = n.do(t, "POST", "/v1/queues/q/messages/batch", map[string]any{"messages": []any{
		map[string]any{"body": "ok"}, map[string]any{"body": strings.Repeat("x", 101)}}})
	wantError(t, r, http.StatusRequestEntityTooLarge, "payload_too_large", "messages[1].body")
	// Exactly at the limit is fine.
	n.send(t, "q", map[string]any{"body": strings.Repeat("x", 100)})
}

func TestSendBatchAllOrNothing(t *testing.T) {
	n := newNode(t)
	r := n.do(t, "POST", "/v1/queues/b/messages/batch", map[string]any{"messages": []any{
		map[string]any{"body": "1"}, map[string]any{"body": "2"}, map[string]any{"body": "3", "delaySeconds": -5}}})
	wantError(t, r, http.StatusBadRequest, "invalid_request", "messages[2].delaySeconds")
	r = n.do(t, "POST", "/v1/queues/b/messages/batch", `{"messages":[{"body":"1"},{"body":"2","nope":true}]}`)
	wantError(t, r, http.StatusBadRequest, "invalid_request", "messages[1].nope")
	// A conflict found in the database also rolls the whole batch back.
	n.send(t, "b", map[string]any{"body": "first", "messageId": "dup"})
	r = n.do(t, "POST", "/v1/queues/b/messages/batch", map[string]any{"messages": []any{
		map[string]any{"body": "new"}, map[string]any{"body": "different", "messageId": "dup"}}})
	wantError(t, r, http.StatusConflict, "idempotency_conflict")
	msgs := n.receive(t, "b", map[string]any{"maxMessages": 10})
	if len(msgs) != 1 || msgs[0]["body"] != "first" {
		t.Fatalf("a failed batch left messages behind: %v", msgs)
	}

	body := n.must(t, http.StatusCreated, "POST", "/v1/queues/b/messages/batch", map[string]any{"messages": []any{
		map[string]any{"body": "x1"}, map[string]any{"body": "x2", "messageId": "k"}, map[string]any{"body": "x2", "messageId": "k"}}})
	results := objects(t, body["results"])
	if len(results) != 3 || results[1]["messageId"] != "k" || results[2]["duplicate"] != true || results[2]["sequence"] != results[1]["sequence"] {
		t.Fatalf("batch results: %v", results)
	}
	if num(results[0]["sequence"]) >= num(results[1]["sequence"]) {
		t.Fatalf("sequences do not follow batch order: %v", results)
	}
	wantError(t, n.do(t, "POST", "/v1/queues/b/messages/batch", map[string]any{"messages": []any{}}), http.StatusBadRequest, "invalid_request", "messages")
	many := make([]any, 1001)
	for i := range many {
		many[i] = map[string]any{"body": "x"}
	}
	wantError(t, n.do(t, "POST", "/v1/queues/b/messages/batch", map[string]any{"messages": many}), http.StatusBadRequest, "invalid_request", "messages")
}

func TestSendIdempotency(t *testing.T) {
	n := newNode(t)
	first := n.send(t, "d", map[string]any{"body": "x", "messageId": "pay-1"})
	again := n.must(t, http.StatusOK, "POST", "/v1/queues/d/messages", map[string]any{"body": "x", "messageId": "pay-1"})
	if again["duplicate"] != true || again["sequence"] != first["sequence"] || again["sentAt"] != first["sentAt"] {
		t.Fatalf("duplicate answer %v, first %v", again, first)
	}
	wantError(t, n.do(t, "POST", "/v1/queues/d/messages", map[string]any{"body": "y", "messageId": "pay-1"}), http.StatusConflict, "idempotency_conflict")
	// The key outlives the message's ack.
	m := n.receive(t, "d", nil)[0]
	n.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": m["receiptHandle"]})
	again = n.must(t, http.StatusOK, "POST", "/v1/queues/d/messages", map[string]any{"body": "x", "messageId": "pay-1"})
	if again["duplicate"] != true {
		t.Fatalf("after ack: %v", again)
	}
	if msgs := n.receive(t, "d", nil); len(msgs) != 0 {
		t.Fatalf("a duplicate was enqueued: %v", msgs)
	}
	// Another queue has its own keys.
	n.send(t, "d2", map[string]any{"body": "x", "messageId": "pay-1"})
}

func TestSendPolicies(t *testing.T) {
	n := newNode(t)
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/p", map[string]any{"delaySeconds": 10, "expirationSeconds": 100})
	res := n.send(t, "p", map[string]any{"body": "queue defaults"})
	if res["delayedTo"] == nil || res["expiresAt"] == nil {
		t.Fatalf("queue defaults not applied: %v", res)
	}
	res = n.send(t, "p", map[string]any{"body": "explicit zero", "delaySeconds": 0, "expirationSeconds": 0})
	if res["delayedTo"] != nil || res["expiresAt"] != nil {
		t.Fatalf("explicit zero did not override: %v", res)
	}
	msgs := n.receive(t, "p", map[string]any{"maxMessages": 10})
	if len(msgs) != 1 || msgs[0]["body"] != "explicit zero" {
		t.Fatalf("the delayed message was delivered early: %v", msgs)
	}
}
