package apitest

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/node"
)

// metricValue reads one unlabelled series from the node's /metrics (-1 when
// it is missing).
func metricValue(t *testing.T, n *testNode, name string) float64 {
	t.Helper()
	resp, err := http.Get(n.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %q", name, line)
			}
			return f
		}
	}
	return -1
}

// SKIPQ_MAX_WAITERS caps the receives waiting on a node: one more that would
// wait is answered at once with 429 too_many_requests and Retry-After, and
// counted; a receive that finds messages, or does not wait, is not
// affected; and once a waiter ends, its slot is free again.
func TestWaiterCap(t *testing.T) {
	n := newNode(t, func(c *node.Config) { c.Limits.MaxWaiters = 3 })
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/w", nil)
	if v := metricValue(t, n, "skipq_longpoll_waiters_max"); v != 3 {
		t.Fatalf("skipq_longpoll_waiters_max = %v, want 3", v)
	}
	type answer struct {
		msgs []map[string]any
	}
	got := make(chan answer, 4)
	park := func() {
		r := n.receiveAsync(t, "w", map[string]any{"waitSeconds": 30})
		go func() { got <- answer{<-r} }()
	}
	parked := func(want float64) {
		t.Helper()
		eventually(t, 10*time.Second, "parked receives", func() bool {
			return metricValue(t, n, "skipq_longpoll_waiters") == want
		})
	}
	for range 3 {
		park()
	}
	parked(3)

	// The fourth would wait: refused at once, with nothing claimed.
	r := n.do(t, "POST", "/v1/queues/w/messages/receive", map[string]any{"waitSeconds": 30})
	wantError(t, r, http.StatusTooManyRequests, "too_many_requests")
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	if v := metricValue(t, n, "skipq_longpoll_refused_total"); v != 1 {
		t.Fatalf("skipq_longpoll_refused_total = %v, want 1", v)
	}
	// A receive that does not wait is not refused.
	if msgs := n.receive(t, "w", map[string]any{"waitSeconds": 0}); len(msgs) != 0 {
		t.Fatalf("got %v from an empty queue", msgs)
	}

	// A send ends one waiter; its slot takes another.
	n.send(t, "w", map[string]any{"body": "one"})
	select {
	case a := <-got:
		if len(a.msgs) != 1 || a.msgs[0]["body"] != "one" {
			t.Fatalf("the woken receive got %v", a.msgs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no waiting receive got the message")
	}
	parked(2)
	park()
	parked(3)

	// At the cap (node-wide), a receive that finds a message answers with
	// it: only waiting is capped. Another queue keeps the parked three out
	// of the race for it.
	n.send(t, "other", map[string]any{"body": "two"})
	if msgs := n.receive(t, "other", map[string]any{"waitSeconds": 30}); len(msgs) != 1 || msgs[0]["body"] != "two" {
		t.Fatalf("a receive at the cap with a message available got %v", msgs)
	}
	if v := metricValue(t, n, "skipq_longpoll_refused_total"); v != 1 {
		t.Fatalf("skipq_longpoll_refused_total = %v, want still 1", v)
	}
	// End the three still waiting, so none outlives the test.
	n.must(t, http.StatusCreated, "POST", "/v1/queues/w/messages/batch", map[string]any{"messages": []any{
		map[string]any{"body": "a"}, map[string]any{"body": "b"}, map[string]any{"body": "c"}}})
	for range 3 {
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("a waiting receive did not get its message")
		}
	}
}
