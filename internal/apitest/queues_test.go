package apitest

import (
	"fmt"
	"net/http"
	"testing"
)

func TestQueueCreateUpdateGet(t *testing.T) {
	n := newNode(t)
	q := n.must(t, http.StatusCreated, "PUT", "/v1/queues/orders", map[string]any{"visibilitySeconds": 30})
	if q["name"] != "orders" || num(q["visibilitySeconds"]) != 30 || num(q["receiveWaitSeconds"]) != 1 ||
		num(q["dedupWindowSeconds"]) != 300 || q["deadLetterQueue"] != "" || q["createdAt"] == nil {
		t.Fatalf("created queue: %v", q)
	}
	// An update changes only the given fields.
	q = n.must(t, http.StatusOK, "PUT", "/v1/queues/orders", map[string]any{"delaySeconds": 5, "deadLetterQueue": "orders.dlq"})
	if num(q["visibilitySeconds"]) != 30 || num(q["delaySeconds"]) != 5 || q["deadLetterQueue"] != "orders.dlq" {
		t.Fatalf("updated queue: %v", q)
	}
	// An empty body is {}.
	n.must(t, http.StatusOK, "PUT", "/v1/queues/orders", nil)

	n.must(t, http.StatusOK, "PUT", "/v1/queues/orders", map[string]any{"delaySeconds": 0})
	n.send(t, "orders", map[string]any{"body": "a"})
	n.send(t, "orders", map[string]any{"body": "b", "delaySeconds": 60})
	n.send(t, "orders", map[string]any{"body": "c"})
	n.receive(t, "orders", map[string]any{"maxMessages": 1})
	got := n.must(t, http.StatusOK, "GET", "/v1/queues/orders", nil)
	st := got["stats"].(map[string]any)
	if num(st["available"]) != 1 || num(st["delayed"]) != 1 || num(st["inFlight"]) != 1 || num(st["total"]) != 3 || st["oldestAvailableAt"] == nil {
		t.Fatalf("stats: %v", st)
	}
}

func TestQueueNameRules(t *testing.T) {
	n := newNode(t)
	for _, good := range []string{"orders", "payments.us-east", "orders.dlq", "a_b:c"} {
		n.must(t, http.StatusCreated, "PUT", "/v1/queues/"+good, nil)
	}
	for _, bad := range []string{"orders%20processing", "orders.", "orders.*", "a%3Eb", "tab%09x"} {
		r := n.do(t, "PUT", "/v1/queues/"+bad, nil)
		wantError(t, r, http.StatusBadRequest, "invalid_request", "queue")
	}
	long := make([]byte, 257)
	for i := range long {
		long[i] = 'x'
	}
	wantError(t, n.do(t, "PUT", "/v1/queues/"+string(long), nil), http.StatusBadRequest, "invalid_request", "queue")
	// Names are case-sensitive.
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/Orders", nil)
}

func TestQueueSettingsValidation(t *testing.T) {
	n := newNode(t)
	r := n.do(t, "PUT", "/v1/queues/q", map[string]any{"visibilitySeconds": -1, "delaySeconds": 50000, "deadLetterQueue": "bad."})
	wantError(t, r, http.StatusBadRequest, "invalid_request", "visibilitySeconds", "delaySeconds", "deadLetterQueue")
	wantError(t, n.do(t, "PUT", "/v1/queues/q", `{"visibilitySeconds": "60"}`), http.StatusBadRequest, "invalid_request", "visibilitySeconds")
	wantError(t, n.do(t, "PUT", "/v1/queues/q", `{"nope": 1}`), http.StatusBadRequest, "invalid_request", "nope")
	wantError(t, n.do(t, "PUT", "/v1/queues/q", `{"visibilitySeconds": `), http.StatusBadRequest, "invalid_request")
}

func TestQueueListPagination(t *testing.T) {
	n := newNode(t)
	for i := range 5 {
		n.must(t, http.StatusCreated, "PUT", fmt.Sprintf("/v1/queues/app.q%d", i), nil)
	}
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/other", nil)
	var names []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		body := n.must(t, http.StatusOK, "GET", "/v1/queues?prefix=app.&limit=2&cursor="+cursor, nil)
		for _, q := range objects(t, body["queues"]) {
			names = append(names, q["name"].(string))
		}
		next, ok := body["nextCursor"].(string)
		if !ok {
			break
		}
		cursor = next
	}
	if fmt.Sprint(names) != "[app.q0 app.q1 app.q2 app.q3 app.q4]" {
		t.Fatalf("listed %v", names)
	}
	wantError(t, n.do(t, "GET", "/v1/queues?limit=0", nil), http.StatusBadRequest, "invalid_request", "limit")
	wantError(t, n.do(t, "GET", "/v1/queues?cursor=%21%21", nil), http.StatusBadRequest, "invalid_request", "cursor")
}

func TestQueueDeleteAndPurge(t *testing.T) {
	n := newNode(t)
	for range 3 {
		n.send(t, "jobs", map[string]any{"body": "x"})
	}
	n.receive(t, "jobs", nil) // one in flight: purge takes every state
	body := n.must(t, http.StatusOK, "POST", "/v1/queues/jobs/purge", nil)
	if num(body["purged"]) != 3 {
		t.Fatalf("purged %v", body["purged"])
	}
	if msgs := n.receive(t, "jobs", nil); len(msgs) != 0 {
		t.Fatalf("purged queue delivered %v", msgs)
	}
	n.send(t, "jobs", map[string]any{"body": "x"})
	r := n.do(t, "DELETE", "/v1/queues/jobs", nil)
	if r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Raw)
	}
	wantError(t, n.do(t, "GET", "/v1/queues/jobs", nil), http.StatusNotFound, "not_found")
	wantError(t, n.do(t, "DELETE", "/v1/queues/jobs", nil), http.StatusNotFound, "not_found")
	wantError(t, n.do(t, "POST", "/v1/queues/jobs/purge", nil), http.StatusNotFound, "not_found")
	// Re-created, it starts empty: the old messages went with the queue.
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/jobs", nil)
	if msgs := n.receive(t, "jobs", nil); len(msgs) != 0 {
		t.Fatalf("deleted queue's messages survived: %v", msgs)
	}
}

func TestEncodedSlashStaysInItsSegment(t *testing.T) {
	n := newNode(t)
	n.send(t, "x", map[string]any{"body": "keep", "messageId": "m1"})
	wantError(t, n.do(t, "DELETE", "/v1/queues/x%2Fmessages%2Fm1", nil), http.StatusBadRequest, "invalid_request", "queue")
	wantError(t, n.do(t, "PUT", "/v1/queues/a%2Fb", nil), http.StatusBadRequest, "invalid_request", "queue")
	wantError(t, n.do(t, "GET", "/v1/queues/x/", nil), http.StatusNotFound, "not_found")
	if got := n.receive(t, "x", map[string]any{"isPeek": true}); len(got) != 1 {
		t.Fatalf("the message was touched: %v", got)
	}
	// Percent-encoded names that are valid decode as usual.
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/%C3%BCber", nil)
	n.must(t, http.StatusOK, "GET", "/v1/queues/%C3%BCber", nil)
}
