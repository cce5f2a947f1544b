package apitest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/testdb"
)

// clientTimeout bounds every request of the outage test: a node that hangs
// instead of answering 503 fails it.
const clientTimeout = 5 * time.Second

func TestDatabaseOutage(t *testing.T) {
	proxy, url := newDBProxy(t, testdb.New(t))
	n := startNode(t, url)
	n.send(t, "o", map[string]any{"body": "before"})
	n.send(t, "s", map[string]any{"body": "held"})
	h := n.receive(t, "s", map[string]any{"visibilitySeconds": 300})[0]["receiptHandle"]

	// A long-poll parked when the database goes away ends cleanly.
	waiting := n.doAsync(t, "POST", "/v1/queues/idle/messages/receive", map[string]any{"waitSeconds": 3})
	waitForWaiters(t, n)
	proxy.cut()

	for _, call := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/v1/queues/o/messages", map[string]any{"body": "during"}},
		{"POST", "/v1/queues/o/messages/receive", map[string]any{"waitSeconds": 0}},
		{"GET", "/v1/queues/o", nil},
		{"GET", "/readyz", nil},
		// Settles: 503, never receipt_stale (the handle is live) or 500.
		{"POST", "/v1/receipts/ack", map[string]any{"receiptHandle": h}},
		{"POST", "/v1/receipts/nack", map[string]any{"receiptHandle": h}},
		{"POST", "/v1/receipts/visibility", map[string]any{"receiptHandles": []any{h}, "visibilitySeconds": 60}},
		{"POST", "/v1/receipts/requeue", map[string]any{"receiptHandle": h, "queue": "elsewhere"}},
	} {
		r := timed(t, n, call.method, call.path, call.body)
		wantError(t, r, http.StatusServiceUnavailable, "unavailable")
		if r.Header.Get("Retry-After") == "" {
			t.Fatalf("%s %s: 503 without Retry-After", call.method, call.path)
		}
	}
	if r := n.do(t, "GET", "/healthz", nil); r.Status != http.StatusOK {
		t.Fatalf("healthz during the outage: %d", r.Status)
	}
	select {
	case r := <-waiting:
		if r.Status != http.StatusOK && r.Status != http.StatusServiceUnavailable {
			t.Fatalf("the parked long-poll ended with %d %s", r.Status, r.Raw)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the parked long-poll did not end")
	}

	proxy.restore()
	eventually(t, 20*time.Second, "the node to recover", func() bool {
		return timed(t, n, "GET", "/readyz", nil).Status == http.StatusOK
	})
	// The settles refused during the outage changed nothing: the handle
	// still holds its lease, and settles now.
	n.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": h})
	n.send(t, "o", map[string]any{"body": "after"})
	msgs := n.receive(t, "o", map[string]any{"maxMessages": 10})
	if len(msgs) != 2 || msgs[0]["body"] != "before" || msgs[1]["body"] != "after" {
		t.Fatalf("after recovery: %v", msgs)
	}
}

// timed is do with clientTimeout on the whole exchange.
func timed(t *testing.T, n *testNode, method, path string, body any) response {
	t.Helper()
	done := n.doAsync(t, method, path, body)
	select {
	case r := <-done:
		return r
	case <-time.After(clientTimeout):
		t.Fatalf("%s %s did not answer within %s", method, path, clientTimeout)
	}
	return response{}
}

// /readyz during a rolling upgrade (issue #18): a database one migration
// ahead of the node (a newer release migrated it) keeps the node ready,
// because every migration keeps the previous release serving; one behind
// (a node started with SKIPQ_MIGRATE=false before the migration ran) is not.
func TestReadyzAcrossSchemaVersions(t *testing.T) {
	n := newNode(t)
	pool := newPool(t, n.DB)
	ctx := context.Background()
	if r := n.do(t, "GET", "/readyz", nil); r.Status != http.StatusOK {
		t.Fatalf("readyz at the binary's schema: %d %s", r.Status, r.Raw)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO skipq_goose_version (version_id, is_applied)
		SELECT max(version_id) + 1, true FROM skipq_goose_version`); err != nil {
		t.Fatal(err)
	}
	if r := n.do(t, "GET", "/readyz", nil); r.Status != http.StatusOK {
		t.Fatalf("readyz with the schema one migration ahead: %d %s", r.Status, r.Raw)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM skipq_goose_version WHERE version_id >=
		(SELECT max(version_id) - 1 FROM skipq_goose_version)`); err != nil {
		t.Fatal(err)
	}
	r := n.do(t, "GET", "/readyz", nil)
	wantError(t, r, http.StatusServiceUnavailable, "unavailable")
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
}
