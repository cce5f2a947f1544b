package apitest

import (
	"context"
	"net/http"
	"testing"

	"github.com/skipq/skipq/internal/node"
)

// Message policy fields against the queue's defaults (docs/API.md#model): an absent
// field takes the queue's, `maxReceiveCount: 0` means the queue's (and the
// server's 1024 when the queue says 0 too), `deadLetterQueue: ""` overrides
// the queue's dead-letter queue (discard), and `maxReceiveQueue` is an alias
// of `deadLetterQueue`. Checked by behaviour: where a message goes after its
// deliveries run out.
func TestMessagePoliciesAgainstQueueDefaults(t *testing.T) {
	n := newNode(t)
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/pol", map[string]any{"maxReceiveCount": 2, "deadLetterQueue": "pol.dlq"})
	inDLQ := func(queue, id string) bool {
		t.Helper()
		for _, m := range objects(t, n.must(t, http.StatusOK, "GET", "/v1/dlq?sourceQueue=pol", nil)["messages"]) {
			if m["messageId"] == id && m["queue"] == queue {
				return true
			}
		}
		return false
	}

	// maxReceiveCount 0: the queue's 2, then the queue's dead-letter queue.
	n.send(t, "pol", map[string]any{"body": "x", "messageId": "zero", "maxReceiveCount": 0})
	exhaust(t, n, "pol", "zero", 2)
	if !inDLQ("pol.dlq", "zero") {
		t.Fatal("maxReceiveCount 0 did not take the queue's limit and dead-letter queue")
	}
	// deadLetterQueue "": discarded, although the queue has one.
	n.send(t, "pol", map[string]any{"body": "x", "messageId": "discard", "deadLetterQueue": ""})
	exhaust(t, n, "pol", "discard", 2)
	if inDLQ("pol.dlq", "discard") {
		t.Fatal(`deadLetterQueue "" did not override the queue's dead-letter queue`)
	}
	// maxReceiveQueue: the alias.
	n.send(t, "pol", map[string]any{"body": "x", "messageId": "alias", "maxReceiveCount": 1, "maxReceiveQueue": "pol.alias"})
	exhaust(t, n, "pol", "alias", 1)
	if !inDLQ("pol.alias", "alias") {
		t.Fatal("maxReceiveQueue did not act as deadLetterQueue")
	}

	// A queue whose maxReceiveCount is 0 gives its messages the server's
	// 1024, whether the message leaves the field out or says 0.
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/pol.server", map[string]any{"maxReceiveCount": 0})
	n.send(t, "pol.server", map[string]any{"body": "x", "messageId": "server"})
	n.send(t, "pol.server", map[string]any{"body": "x", "messageId": "server0", "maxReceiveCount": 0})
	for _, id := range []string{"server", "server0"} {
		var max int
		if err := connect(t, n.DB).QueryRow(context.Background(),
			"SELECT max_receive_count FROM skipq.messages WHERE message_id = $1", id).Scan(&max); err != nil || max != 1024 {
			t.Fatalf("message %s of a queue with maxReceiveCount 0 has maxReceiveCount %d (%v), want the server's 1024", id, max, err)
		}
	}
}

// The server's default is SKIPQ_MAX_RECEIVE_COUNT, not a fixed 1024: with
// it at 2, `maxReceiveCount: 0` on a queue that sets none means two
// deliveries.
func TestMaxReceiveCountZeroTakesTheServerLimit(t *testing.T) {
	n := newNode(t, func(c *node.Config) { c.Limits.MaxReceiveCount = 2 })
	n.send(t, "lim", map[string]any{"body": "x", "messageId": "zero", "maxReceiveCount": 0})
	exhaust(t, n, "lim", "zero", 2)
}

// exhaust receives and nacks message id of queue, which must be the only
// one deliverable, deliveries times, and checks that it is not deliverable
// after that.
func exhaust(t *testing.T, n *testNode, queue, id string, deliveries int) {
	t.Helper()
	for i := 0; i < deliveries; i++ {
		got := n.receive(t, queue, nil)
		if len(got) != 1 || got[0]["messageId"] != id {
			t.Fatalf("delivery %d of %s: %v", i+1, id, got)
		}
		n.must(t, http.StatusOK, "POST", "/v1/receipts/nack", map[string]any{"receiptHandle": got[0]["receiptHandle"]})
	}
	if got := n.receive(t, queue, map[string]any{"isPeek": true}); len(got) != 0 {
		t.Fatalf("%s still deliverable after %d deliveries: %v", id, deliveries, got)
	}
}

// A known route with the wrong method: 405 method_not_allowed, enveloped.
func TestWrongMethodIs405(t *testing.T) {
	n := newNode(t)
	for _, c := range []struct{ method, path string }{
		{"PATCH", "/v1/queues/q"},
		{"GET", "/v1/receipts/ack"},
		{"PUT", "/v1/queues/q/messages"},
	} {
		wantError(t, n.do(t, c.method, c.path, nil), http.StatusMethodNotAllowed, "method_not_allowed")
	}
}
