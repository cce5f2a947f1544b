package apitest

// Regression tests for defects an outside attack found in the first build.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
)

// post sends JSON without failing the test (for use off the test goroutine)
// and returns the status and the decoded body.
func post(client *http.Client, url string, body any) (int, map[string]any, error) {
	raw, _ := json.Marshal(body)
	resp, err := client.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, nil
}

// Senders, receivers and a loop of DELETEs on one queue: a send either lands
// (and goes with a later delete) or auto-creates the queue anew -- never a
// 404, a 500 or a conflict -- no message outlives its queue, and every
// handle received before the last delete is stale after it.
func TestQueueDeleteRacingSendsAndReceives(t *testing.T) {
	n := newNode(t)
	client := &http.Client{Timeout: 30 * time.Second}
	base := n.URL + "/v1/queues/race"
	ctx, stop := context.WithTimeout(context.Background(), 2*time.Second)
	defer stop()

	var mu sync.Mutex
	statuses := map[string]int{} // "route status code" -> count
	var handles []string
	count := func(route string, status int, body map[string]any) {
		code := ""
		if e, ok := body["error"].(map[string]any); ok {
			code, _ = e["code"].(string)
		}
		mu.Lock()
		statuses[fmt.Sprintf("%s %d %s", route, status, code)]++
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				msg := map[string]any{"body": "x"}
				if w%2 == 1 { // keyed sends take the transactional path
					msg["messageId"] = fmt.Sprintf("w%d-%d", w, i)
				}
				status, body, err := post(client, base+"/messages", msg)
				if err != nil {
					continue
				}
				count("send", status, body)
				if w%2 == 1 && status == http.StatusCreated {
					// An identical resend is a duplicate or, if the queue was
					// deleted since, a new message: never a conflict.
					status, body, err = post(client, base+"/messages", msg)
					if err == nil {
						count("resend", status, body)
					}
				}
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				status, body, err := post(client, base+"/messages/receive", map[string]any{"maxMessages": 10, "waitSeconds": 0})
				if err != nil || status != http.StatusOK {
					if err == nil {
						count("receive", status, body)
					}
					continue
				}
				list, _ := body["messages"].([]any)
				mu.Lock()
				for _, m := range list {
					handles = append(handles, m.(map[string]any)["receiptHandle"].(string))
				}
				mu.Unlock()
			}
		}()
	}
	deletes := 0
	for ctx.Err() == nil {
		req, _ := http.NewRequest("DELETE", base, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			deletes++
		}
	}
	wg.Wait()
	n.do(t, "DELETE", "/v1/queues/race", nil)

	for k, c := range statuses {
		switch k {
		case "send 201 ", "resend 200 ", "resend 201 ":
		case "send 503 unavailable", "resend 503 unavailable":
			// A send whose queue vanished five times in a row; retryable.
			t.Logf("%d × %s", c, k)
		default:
			t.Errorf("%d answers %q", c, k)
		}
	}
	if statuses["send 201 "] == 0 || deletes < 10 {
		t.Fatalf("the race did not run: %v, %d deletes", statuses, deletes)
	}

	// Handles of the deleted queue settle nothing.
	if len(handles) > 0 {
		if len(handles) > 1024 {
			handles = handles[:1024]
		}
		body := n.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandles": handles})
		if num(body["succeeded"]) != 0 {
			t.Fatalf("%d handles of a deleted queue acked", num(body["succeeded"]))
		}
	}

	// Whatever a racing send left behind is unreachable now and gone after
	// the worker's sweep (run here directly, not after its 30 s period).
	pool, err := pgxpool.New(context.Background(), n.DB)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := db.New(pool).MessageDeleteOrphaned(context.Background(), 100000); err != nil {
		t.Fatal(err)
	}
	var orphans int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM skipq.messages m
		WHERE NOT EXISTS (SELECT 1 FROM skipq.queues q WHERE q.id = m.queue_id)`).Scan(&orphans); err != nil || orphans != 0 {
		t.Fatalf("%d messages outlive their queue (%v)", orphans, err)
	}
	t.Logf("%d deletes; answers %v; %d handles checked", deletes, statuses, len(handles))
}

// A handle counts once per settle request, and a stale handle of a message
// is not credited because the live handle of the same message settled it.
func TestSettleCountsEachHandleOnce(t *testing.T) {
	n := newNode(t)
	n.send(t, "dup", map[string]any{"body": "x"})
	h := n.receive(t, "dup", nil)[0]["receiptHandle"].(string)
	body := n.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandles": []string{h, h, h}})
	failed := objects(t, body["failed"])
	if num(body["succeeded"]) != 1 || len(failed) != 2 || failed[0]["code"] != "receipt_stale" {
		t.Fatalf("ack of one handle three times: %s", mustJSON(body))
	}

	n.send(t, "dup", map[string]any{"body": "y"})
	first := n.receive(t, "dup", nil)[0]["receiptHandle"].(string)
	n.must(t, http.StatusOK, "POST", "/v1/receipts/nack", map[string]any{"receiptHandle": first})
	live := n.receive(t, "dup", nil)[0]["receiptHandle"].(string)
	for _, route := range []string{"visibility", "nack", "ack"} {
		req := map[string]any{"receiptHandles": []string{first, live, live}}
		if route == "visibility" {
			req["visibilitySeconds"] = 30
		}
		body = n.must(t, http.StatusOK, "POST", "/v1/receipts/"+route, req)
		failed = objects(t, body["failed"])
		if num(body["succeeded"]) != 1 || len(failed) != 2 || failed[0]["receiptHandle"] != first || failed[1]["receiptHandle"] != live {
			t.Fatalf("%s of [stale, live, live]: %s", route, mustJSON(body))
		}
		if route == "nack" {
			live = n.receive(t, "dup", nil)[0]["receiptHandle"].(string)
		}
	}
}

// Text fields are Postgres text, which cannot hold NUL: 400 at the field,
// never a 500. The body is bytes and may hold NUL.
func TestNULInTextFieldsIsInvalid(t *testing.T) {
	n := newNode(t)
	for field, msg := range map[string]map[string]any{
		"metadata": {"body": "x", "metadata": "a\x00b"},
		"clientId": {"body": "x", "clientId": "a\x00b"},
		"tags.k":   {"body": "x", "tags": map[string]string{"k": "a\x00b"}},
	} {
		wantError(t, n.do(t, "POST", "/v1/queues/nul/messages", msg), http.StatusBadRequest, "invalid_request", field)
		wantError(t, n.do(t, "POST", "/v1/queues/nul/messages/batch", map[string]any{"messages": []any{msg}}),
			http.StatusBadRequest, "invalid_request", "messages[0]."+field)
	}
	got := n.send(t, "nul", map[string]any{"body": "a\x00b"})
	if got["messageId"] == "" {
		t.Fatalf("a body with NUL was not sent: %v", got)
	}
	if m := n.receive(t, "nul", nil); len(m) != 1 || m[0]["body"] != "a\x00b" {
		t.Fatalf("body with NUL came back as %v", m)
	}
	wantError(t, n.do(t, "GET", "/v1/queues?prefix=a%00", nil), http.StatusBadRequest, "invalid_request", "prefix")
	wantError(t, n.do(t, "GET", "/v1/queues?prefix=%ff", nil), http.StatusBadRequest, "invalid_request", "prefix")
	// Cursors that decode to bytes text cannot hold (base64url of "a\x00", "\xff").
	for _, cursor := range []string{"YQA", "_w"} {
		wantError(t, n.do(t, "GET", "/v1/queues?cursor="+cursor, nil), http.StatusBadRequest, "invalid_request", "cursor")
	}
}

// A queue cannot be its own dead-letter queue, by setting or per message.
func TestQueueIsNotItsOwnDeadLetterQueue(t *testing.T) {
	n := newNode(t)
	wantError(t, n.do(t, "PUT", "/v1/queues/loop", map[string]any{"deadLetterQueue": "loop"}),
		http.StatusBadRequest, "invalid_request", "deadLetterQueue")
	wantError(t, n.do(t, "POST", "/v1/queues/loop/messages", map[string]any{"body": "x", "deadLetterQueue": "loop"}),
		http.StatusBadRequest, "invalid_request", "deadLetterQueue")
	wantError(t, n.do(t, "POST", "/v1/queues/loop/messages", map[string]any{"body": "x", "maxReceiveQueue": "loop"}),
		http.StatusBadRequest, "invalid_request", "deadLetterQueue")
	wantError(t, n.do(t, "POST", "/v1/queues/loop/messages/batch", map[string]any{"messages": []any{
		map[string]any{"body": "x"}, map[string]any{"body": "x", "deadLetterQueue": "loop"}}}),
		http.StatusBadRequest, "invalid_request", "messages[1].deadLetterQueue")
	// Another queue is fine, and so is a name that only starts the same.
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/loop", map[string]any{"deadLetterQueue": "loop.dlq"})
	n.send(t, "loop", map[string]any{"body": "x", "deadLetterQueue": "loop2"})
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return strings.TrimSpace(string(b))
}

// Text that Postgres text cannot hold (NUL, invalid UTF-8) in the newer
// inputs is a 400 at the field's path, never a 500 (22021): a nack's
// reason (one handle and a list), search's queuePrefix and messageId, and
// a search cursor naming a queue with a NUL.
func TestNewerTextInputsRefuseNUL(t *testing.T) {
	n := newNode(t)
	n.send(t, "nul", map[string]any{"body": "x"})
	h := n.receive(t, "nul", nil)[0]["receiptHandle"]
	for _, reason := range []string{"a\x00b", "\x00"} {
		wantError(t, n.do(t, "POST", "/v1/receipts/nack", map[string]any{"receiptHandle": h, "reason": reason}),
			http.StatusBadRequest, "invalid_request", "reason")
		wantError(t, n.do(t, "POST", "/v1/receipts/nack", map[string]any{"receiptHandles": []any{h}, "reason": reason}),
			http.StatusBadRequest, "invalid_request", "reason")
	}
	wantError(t, n.do(t, "GET", "/v1/messages?queuePrefix=a%00", nil), http.StatusBadRequest, "invalid_request", "queuePrefix")
	wantError(t, n.do(t, "GET", "/v1/messages?queuePrefix=%ff", nil), http.StatusBadRequest, "invalid_request", "queuePrefix")
	wantError(t, n.do(t, "GET", "/v1/messages?messageId=a%00", nil), http.StatusBadRequest, "invalid_request", "messageId")
	// base64url of {"t":1,"q":"a\u0000","s":1}
	cursor := base64.RawURLEncoding.EncodeToString([]byte(`{"t":1,"q":"a\u0000","s":1}`))
	wantError(t, n.do(t, "GET", "/v1/messages?cursor="+cursor, nil), http.StatusBadRequest, "invalid_request", "cursor")
	// Path segments reach SQL too.
	for _, path := range []string{"/v1/queues/nul/messages/a%00", "/v1/queues/nul/messages/a%00/history", "/v1/queues/a%00"} {
		if r := n.do(t, "GET", path, nil); r.Status != http.StatusBadRequest && r.Status != http.StatusNotFound {
			t.Errorf("GET %s: %d %s", path, r.Status, r.Raw)
		}
	}
}
