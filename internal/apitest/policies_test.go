package apitest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/node"
)

func parseTime(t *testing.T, v any) time.Time {
	t.Helper()
	s, _ := v.(string)
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("not a timestamp: %v", v)
	}
	return tm
}

func TestDelayThenExpiryArithmetic(t *testing.T) {
	n := newNode(t)
	res := n.send(t, "de", map[string]any{"body": "x", "delaySeconds": 100, "expirationSeconds": 50})
	sent, delayed, expires := parseTime(t, res["sentAt"]), parseTime(t, res["delayedTo"]), parseTime(t, res["expiresAt"])
	if delayed.Sub(sent) != 100*time.Second || expires.Sub(delayed) != 50*time.Second {
		t.Fatalf("sentAt %v delayedTo %v expiresAt %v: want +100 s, then +50 s", sent, delayed, expires)
	}
}

func TestDelayedMessageReachesWaitingReceiver(t *testing.T) {
	n := newNode(t)
	n.send(t, "delayed", map[string]any{"body": "later", "delaySeconds": 1})
	if got := n.receive(t, "delayed", nil); len(got) != 0 {
		t.Fatalf("delivered before its delay: %v", got)
	}
	msgs := n.receive(t, "delayed", map[string]any{"waitSeconds": 10})
	if len(msgs) != 1 || msgs[0]["body"] != "later" || msgs[0]["delayedTo"] == nil {
		t.Fatalf("the waiting receive got %v", msgs)
	}
}

// An expired message is never delivered, whether or not the worker has
// removed it yet: the receives run on a node without a worker, after the
// message's expiresAt has passed on the database's clock. Then a worker
// removes it.
func TestExpiredMessagesAreNeverDelivered(t *testing.T) {
	n := newNode(t, func(c *node.Config) { c.Role = "api" })
	short := n.send(t, "exp", map[string]any{"body": "short", "expirationSeconds": 1})
	n.send(t, "exp", map[string]any{"body": "long"})
	conn := connect(t, n.DB)
	eventually(t, 10*time.Second, "the message's expiresAt to pass", func() bool {
		var passed bool
		if err := conn.QueryRow(context.Background(), "SELECT now() > $1::timestamptz", short["expiresAt"]).Scan(&passed); err != nil {
			t.Fatal(err)
		}
		return passed
	})
	if msgs := n.receive(t, "exp", map[string]any{"maxMessages": 10, "isPeek": true}); len(msgs) != 1 || msgs[0]["body"] != "long" {
		t.Fatalf("peek after the expiry: %v", msgs)
	}
	if msgs := n.receive(t, "exp", map[string]any{"maxMessages": 10}); len(msgs) != 1 || msgs[0]["body"] != "long" {
		t.Fatalf("receive after the expiry: %v", msgs)
	}
	startNode(t, n.DB, func(c *node.Config) { c.Role = "worker" })
	eventually(t, 10*time.Second, "the worker to remove the expired message", func() bool {
		var left int
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM skipq.messages WHERE message_id = $1", short["messageId"]).Scan(&left); err != nil {
			t.Fatal(err)
		}
		return left == 0
	})
}

func TestDeadLetterAfterLeaseExpiry(t *testing.T) {
	n := newNode(t)
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/lease", map[string]any{"maxReceiveCount": 1, "deadLetterQueue": "lease.dlq"})
	n.send(t, "lease", map[string]any{"body": "x"})
	m := n.receive(t, "lease", map[string]any{"visibilitySeconds": 1})[0]
	// Its only delivery's lease runs out: the worker moves it, and the
	// source never delivers it again meanwhile.
	var dl []map[string]any
	eventually(t, 10*time.Second, "the worker to dead-letter the message", func() bool {
		if got := n.receive(t, "lease", nil); len(got) != 0 {
			t.Fatalf("redelivered past its limit: %v", got)
		}
		dl = n.receive(t, "lease.dlq", nil)
		return len(dl) == 1
	})
	if dl[0]["messageId"] != m["messageId"] || dl[0]["reRoutedFrom"] != "lease" || dl[0]["deadLetteredAt"] == nil {
		t.Fatalf("dead-lettered: %v", dl[0])
	}
	wantError(t, n.do(t, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": m["receiptHandle"]}), http.StatusNotFound, "receipt_stale")
}

func TestLeaseExpiryRedeliversWithStaleOldHandle(t *testing.T) {
	n := newNode(t)
	n.send(t, "re", map[string]any{"body": "x"})
	first := n.receive(t, "re", map[string]any{"visibilitySeconds": 1})[0]
	second := n.receive(t, "re", map[string]any{"waitSeconds": 10})
	if len(second) != 1 || num(second[0]["receiveCount"]) != 2 {
		t.Fatalf("after the lease expired: %v", second)
	}
	wantError(t, n.do(t, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": first["receiptHandle"]}), http.StatusNotFound, "receipt_stale")
	n.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": second[0]["receiptHandle"]})
}
