package apitest

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Failure reasons and dead-letter provenance (docs/API.md#model).

// failureOf is a message object's lastFailure or deadLetter (nil: null).
func failureOf(t *testing.T, m map[string]any, field string) map[string]any {
	t.Helper()
	v, ok := m[field]
	if !ok {
		t.Fatalf("%s missing from %v", field, m)
	}
	if v == nil {
		return nil
	}
	return v.(map[string]any)
}

func TestNackReasonsBecomeTheDeadLettersCause(t *testing.T) {
	n := newNode(t)
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/fr", map[string]any{"maxReceiveCount": 3, "deadLetterQueue": "fr.dlq"})
	n.send(t, "fr", map[string]any{"body": "x", "messageId": "m1"})
	if f := failureOf(t, n.must(t, http.StatusOK, "GET", "/v1/queues/fr/messages/m1", nil), "lastFailure"); f != nil {
		t.Fatalf("a message never delivered has lastFailure %v", f)
	}
	for i, reason := range []string{"first", "second", "third"} {
		m := n.receive(t, "fr", nil)[0]
		if i > 0 {
			// The received message says how its previous delivery failed.
			f := failureOf(t, m, "lastFailure")
			if f == nil || f["cause"] != "nack" || num(f["receiveCount"]) != int64(i) || f["at"] == nil {
				t.Fatalf("delivery %d: lastFailure %v", i+1, f)
			}
		}
		n.must(t, http.StatusOK, "POST", "/v1/receipts/nack", map[string]any{"receiptHandle": m["receiptHandle"], "reason": reason})
		if i == 0 {
			got := n.must(t, http.StatusOK, "GET", "/v1/queues/fr/messages/m1", nil)
			f := failureOf(t, got, "lastFailure")
			if f == nil || f["cause"] != "nack" || f["reason"] != "first" || num(f["receiveCount"]) != 1 {
				t.Fatalf("after the first nack: lastFailure %v", f)
			}
			if d := failureOf(t, got, "deadLetter"); d != nil {
				t.Fatalf("deadLetter on a live message: %v", d)
			}
		}
	}
	dl := objects(t, n.must(t, http.StatusOK, "GET", "/v1/dlq", nil)["messages"])
	if len(dl) != 1 {
		t.Fatalf("dlq: %v", dl)
	}
	d := failureOf(t, dl[0], "deadLetter")
	if d == nil || d["cause"] != "nack" || d["reason"] != "third" || num(d["receiveCount"]) != 3 ||
		d["sourceQueue"] != "fr" || d["at"] != dl[0]["deadLetteredAt"] {
		t.Fatalf("deadLetter %v (message %v)", d, dl[0])
	}
	if f := failureOf(t, dl[0], "lastFailure"); f == nil || f["reason"] != "third" || num(f["receiveCount"]) != 3 {
		t.Fatalf("dead letter's lastFailure %v", f)
	}
	if num(dl[0]["receiveCount"]) != 0 || dl[0]["reRoutedFrom"] != "fr" {
		t.Fatalf("dead letter %v", dl[0])
	}

	// A redrive makes a fresh message: neither field.
	out := n.must(t, http.StatusOK, "POST", "/v1/queues/fr.dlq/messages/m1/redrive", nil)
	as := out["redrivenAs"].(map[string]any)
	got := n.must(t, http.StatusOK, "GET", "/v1/queues/fr/messages/"+as["messageId"].(string), nil)
	if failureOf(t, got, "lastFailure") != nil || failureOf(t, got, "deadLetter") != nil {
		t.Fatalf("redriven message: %v", got)
	}
}

func TestLeaseExpiryIsALastFailureAndACause(t *testing.T) {
	n := newNode(t)
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/le", map[string]any{"maxReceiveCount": 2, "deadLetterQueue": "le.dlq"})
	n.send(t, "le", map[string]any{"body": "x", "messageId": "m1"})
	n.receive(t, "le", map[string]any{"visibilitySeconds": 1})
	// The worker readies it when the lease ends, recording why.
	again := n.receive(t, "le", map[string]any{"visibilitySeconds": 1, "waitSeconds": 10})
	if len(again) != 1 {
		t.Fatalf("not delivered again after its lease: %v", again)
	}
	f := failureOf(t, again[0], "lastFailure")
	if f == nil || f["cause"] != "lease_expired" || f["reason"] != nil || num(f["receiveCount"]) != 1 {
		t.Fatalf("second delivery's lastFailure %v", f)
	}
	// Its last lease runs out: the worker dead-letters it.
	var dl []map[string]any
	eventually(t, 10*time.Second, "the expired last delivery is dead-lettered", func() bool {
		dl = objects(t, n.must(t, http.StatusOK, "GET", "/v1/dlq?cause=lease_expired", nil)["messages"])
		return len(dl) == 1
	})
	d := failureOf(t, dl[0], "deadLetter")
	if d == nil || d["cause"] != "lease_expired" || d["reason"] != nil || num(d["receiveCount"]) != 2 || d["sourceQueue"] != "le" {
		t.Fatalf("deadLetter %v", d)
	}
	if got := objects(t, n.must(t, http.StatusOK, "GET", "/v1/dlq?cause=nack", nil)["messages"]); len(got) != 0 {
		t.Fatalf("cause=nack lists %v", got)
	}
	wantError(t, n.do(t, "GET", "/v1/dlq?cause=crash", nil), http.StatusBadRequest, "invalid_request", "cause")
}

func TestNackReasonLimits(t *testing.T) {
	n := newNode(t)
	n.send(t, "rl", map[string]any{"body": "x", "messageId": "m1"})
	m := n.receive(t, "rl", nil)[0]
	long := strings.Repeat("é", 512) + "x" // 1025 bytes
	wantError(t, n.do(t, "POST", "/v1/receipts/nack", map[string]any{"receiptHandle": m["receiptHandle"], "reason": long}),
		http.StatusBadRequest, "invalid_request", "reason")
	wantError(t, n.do(t, "POST", "/v1/receipts/nack", map[string]any{"receiptHandles": []any{m["receiptHandle"]}, "reason": long}),
		http.StatusBadRequest, "invalid_request", "reason")
	// A reason is the nack's alone.
	wantError(t, n.do(t, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": m["receiptHandle"], "reason": "no"}),
		http.StatusBadRequest, "invalid_request", "reason")
	// Refused whole: the delivery is still in flight under its handle.
	exact := strings.Repeat("é", 512) // 1024 bytes
	res := n.must(t, http.StatusOK, "POST", "/v1/receipts/nack", map[string]any{"receiptHandles": []any{m["receiptHandle"]}, "reason": exact})
	if num(res["succeeded"]) != 1 {
		t.Fatalf("list-form nack: %v", res)
	}
	f := failureOf(t, n.must(t, http.StatusOK, "GET", "/v1/queues/rl/messages/m1", nil), "lastFailure")
	if f == nil || f["reason"] != exact {
		t.Fatalf("lastFailure %v", f)
	}
}

func TestSQLNackRecordsItsReason(t *testing.T) {
	n := newNode(t)
	pool := newPool(t, n.DB)
	ctx := context.Background()
	n.send(t, "sq", map[string]any{"body": "x", "messageId": "m1"})
	receive := func() string {
		var h string
		if err := pool.QueryRow(ctx, "SELECT receipt_handle FROM skipq.receive('sq', 1, 30)").Scan(&h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	if _, err := pool.Exec(ctx, "SELECT skipq.nack($1, $2)", receive(), "from sql"); err != nil {
		t.Fatal(err)
	}
	f := failureOf(t, n.must(t, http.StatusOK, "GET", "/v1/queues/sq/messages/m1", nil), "lastFailure")
	if f == nil || f["cause"] != "nack" || f["reason"] != "from sql" || num(f["receiveCount"]) != 1 {
		t.Fatalf("lastFailure %v", f)
	}
	h := receive()
	if _, err := pool.Exec(ctx, "SELECT skipq.nack($1, $2)", h, strings.Repeat("x", 1025)); sqlState(err) != "22023" {
		t.Fatalf("a 1025-byte reason: %v", err)
	}
	// The one-argument call of earlier releases still works, with no reason.
	if _, err := pool.Exec(ctx, "SELECT skipq.nack($1)", h); err != nil {
		t.Fatal(err)
	}
	f = failureOf(t, n.must(t, http.StatusOK, "GET", "/v1/queues/sq/messages/m1", nil), "lastFailure")
	if f == nil || f["reason"] != nil || num(f["receiveCount"]) != 2 {
		t.Fatalf("lastFailure after skipq.nack(h): %v", f)
	}
}
