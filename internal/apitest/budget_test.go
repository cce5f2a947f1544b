package apitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/skipq/skipq/internal/node"
)

// mib is one MiB.
const mib = 1 << 20

// bigBody is a 1 MiB text body that starts with its index, so a receive's
// order can be checked by looking at three bytes.
func bigBody(i int) string {
	return fmt.Sprintf("%03d", i) + strings.Repeat("x", mib-3)
}

// sendBig sends count 1 MiB messages, ten per batch (~10 MiB a request).
func sendBig(t *testing.T, n *testNode, queue string, count int) {
	t.Helper()
	for i := 0; i < count; i += 10 {
		var batch []any
		for j := i; j < min(i+10, count); j++ {
			batch = append(batch, map[string]any{"body": bigBody(j)})
		}
		n.must(t, http.StatusCreated, "POST", "/v1/queues/"+queue+"/messages/batch", map[string]any{"messages": batch})
	}
}

// checkPrefix asserts that msgs are the queue's messages first, first+1, …
// in order, and returns how many body bytes they carry.
func checkPrefix(t *testing.T, what string, msgs []map[string]any, first int) int {
	t.Helper()
	total := 0
	for i, m := range msgs {
		body, _ := m["body"].(string)
		if len(body) != mib || body[:3] != fmt.Sprintf("%03d", first+i) {
			t.Fatalf("%s: message %d is %.3q (%d bytes), want message %03d of 1 MiB", what, i, body, len(body), first+i)
		}
		total += len(body)
	}
	return total
}

// A receive (or peek) with maxMessages 1024 on a queue of 1 MiB messages
// stops at SKIPQ_MAX_RESPONSE_BYTES instead of answering with all of them:
// the statement itself stops, so the messages left out are not leased and
// the next receive gets them; a message larger than the whole budget still
// comes alone; and the node's allocations for such a receive follow the
// budget, not maxMessages × message size.
func TestReceiveStopsAtResponseBudget(t *testing.T) {
	const budget = 4 * mib
	n := newNode(t, func(c *node.Config) { c.Limits.MaxResponseBytes = budget })
	const total = 40
	sendBig(t, n, "big", total)

	// Each message is estimated at 1 MiB plus its fixed fields, so four fit
	// under 4 MiB: the rows before the fourth are ~3 MiB, before a fifth
	// over 4 MiB. The assertions below need only "fewer than all, within
	// the budget plus one message".
	within := func(what string, msgs []map[string]any, first int) int {
		t.Helper()
		if len(msgs) == 0 || len(msgs) >= total {
			t.Fatalf("%s: %d messages, want at least 1 and fewer than %d", what, len(msgs), total)
		}
		if bytes := checkPrefix(t, what, msgs, first); bytes > budget+mib {
			t.Fatalf("%s: %d body bytes, over the budget %d plus one message", what, bytes, budget)
		}
		return len(msgs)
	}

	peeked := within("peek", n.receive(t, "big", map[string]any{"maxMessages": 1024, "isPeek": true}), 0)
	got := within("first receive", n.receive(t, "big", map[string]any{"maxMessages": 1024}), 0)
	if got != peeked {
		t.Fatalf("peek saw %d messages, the receive took %d: they must obey the same budget", peeked, got)
	}
	// What the first receive left out is still available, not hidden under
	// a lease: the next receive continues right after it.
	got2 := within("second receive", n.receive(t, "big", map[string]any{"maxMessages": 1024}), got)
	st := n.must(t, http.StatusOK, "GET", "/v1/queues/big", nil)["stats"].(map[string]any)
	if num(st["inFlight"]) != int64(got+got2) || num(st["available"]) != int64(total-got-got2) {
		t.Fatalf("after receiving %d+%d of %d: stats %v; the rest must stay available", got, got2, total, st)
	}
	// autoAck takes the same path through the budget.
	within("autoAck receive", n.receive(t, "big", map[string]any{"maxMessages": 1024, "autoAck": true}), got+got2)

	// A message larger than the whole budget still comes, alone.
	tiny := startNode(t, n.DB, func(c *node.Config) { c.Limits.MaxResponseBytes = 1000 })
	for _, opts := range []map[string]any{{"isPeek": true}, {}} {
		opts["maxMessages"] = 10
		msgs := tiny.receive(t, "big", opts)
		if len(msgs) != 1 || len(msgs[0]["body"].(string)) != mib {
			t.Fatalf("receive %v under a 1000-byte budget: %d messages, want exactly one", opts, len(msgs))
		}
	}

	// Memory: everything the process allocates while one receive with
	// maxMessages 1024 is answered (the node runs in this process). Reading
	// the answer into io.Discard keeps the client side out of the count.
	// Before the budget this receive answered with every remaining message
	// (~28 MiB) and allocated several times that; with it, the answer is
	// about the budget, and a small multiple of it bounds the allocations:
	// the rows as scanned, the driver's read buffers and one message's JSON
	// at a time.
	alloc := func() uint64 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.TotalAlloc
	}
	req, _ := json.Marshal(map[string]any{"maxMessages": 1024, "waitSeconds": 0})
	before := alloc()
	resp, err := http.Post(n.URL+"/v1/queues/big/messages/receive", "application/json", bytes.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	size, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	allocated := alloc() - before
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("receive: %d %v", resp.StatusCode, err)
	}
	t.Logf("a receive answering %d bytes allocated %d bytes (%.1f× the budget)", size, allocated, float64(allocated)/budget)
	if size > budget+2*mib {
		t.Fatalf("the answer is %d bytes; the budget is %d", size, budget)
	}
	if allocated > 8*budget {
		t.Fatalf("one receive allocated %d bytes, over 8× the %d-byte budget", allocated, budget)
	}
}

// Browsing a queue and listing dead letters (read-key routes with limits up
// to 1,000) stop at the response budget too: each page is within the
// budget plus one message, and following nextCursor still yields every
// message exactly once.
func TestBrowseAndDeadLettersStopAtResponseBudget(t *testing.T) {
	const budget = 4 * mib
	n := newNode(t, func(c *node.Config) { c.Limits.MaxResponseBytes = budget })
	const total = 9
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/src", map[string]any{"maxReceiveCount": 1, "deadLetterQueue": "src.dlq"})
	sendBig(t, n, "src", total)

	// pages follows nextCursor from path and returns every page's bodies.
	pages := func(path string) [][]string {
		t.Helper()
		var out [][]string
		cursor := ""
		for {
			p := path
			if cursor != "" {
				p += "&cursor=" + cursor
			}
			body := n.must(t, http.StatusOK, "GET", p, nil)
			var page []string
			size := 0
			for _, m := range objects(t, body["messages"]) {
				page = append(page, m["body"].(string)[:3])
				size += len(m["body"].(string))
			}
			if len(page) >= total || size > budget+mib {
				t.Fatalf("GET %s: a page of %d messages, %d body bytes; the budget is %d", p, len(page), size, budget)
			}
			out = append(out, page)
			next, _ := body["nextCursor"].(string)
			if next == "" {
				return out
			}
			cursor = next
		}
	}
	all := func(ps [][]string) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p...)
		}
		return out
	}
	browsed := pages("/v1/queues/src/messages?limit=1000")
	if got := all(browsed); len(got) != total || got[0] != "000" || got[total-1] != fmt.Sprintf("%03d", total-1) {
		t.Fatalf("browsing in pages of %v: %v", len(browsed), got)
	}

	// Dead-letter all of them: receive (within the budget) and nack each
	// last allowed delivery.
	var handles []any
	for len(handles) < total {
		msgs := n.receive(t, "src", map[string]any{"maxMessages": 1024})
		if len(msgs) == 0 {
			t.Fatalf("received %d of %d", len(handles), total)
		}
		for _, m := range msgs {
			handles = append(handles, m["receiptHandle"])
		}
	}
	n.must(t, http.StatusOK, "POST", "/v1/receipts/nack", map[string]any{"receiptHandles": handles})
	dead := all(pages("/v1/dlq?limit=1000"))
	seen := map[string]bool{}
	for _, b := range dead {
		seen[b] = true
	}
	if len(dead) != total || len(seen) != total {
		t.Fatalf("dead letters listed in pages: %v", dead)
	}
}
