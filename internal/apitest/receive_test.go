package apitest

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestReceiveOrderVisibilityPeekAutoAck(t *testing.T) {
	n := newNode(t)
	for i := range 5 {
		n.send(t, "r", map[string]any{"body": fmt.Sprint(i)})
	}
	peeked := n.receive(t, "r", map[string]any{"maxMessages": 2, "isPeek": true})
	if len(peeked) != 2 || peeked[0]["body"] != "0" || peeked[0]["receiptHandle"] != nil || num(peeked[0]["receiveCount"]) != 0 {
		t.Fatalf("peek: %v", peeked)
	}
	got := n.receive(t, "r", map[string]any{"maxMessages": 3})
	if len(got) != 3 || got[0]["body"] != "0" || got[1]["body"] != "1" || got[2]["body"] != "2" {
		t.Fatalf("receive order: %v", got)
	}
	// In flight: hidden from the next receive.
	got = n.receive(t, "r", map[string]any{"maxMessages": 10, "autoAck": true})
	if len(got) != 2 || got[0]["body"] != "3" || got[0]["receiptHandle"] != nil || num(got[0]["receiveCount"]) != 1 {
		t.Fatalf("autoAck receive: %v", got)
	}
	if got := n.receive(t, "r", map[string]any{"maxMessages": 10, "isPeek": true}); len(got) != 0 {
		t.Fatalf("autoAck left messages: %v", got)
	}
	st := n.must(t, http.StatusOK, "GET", "/v1/queues/r", nil)["stats"].(map[string]any)
	if num(st["inFlight"]) != 3 || num(st["total"]) != 3 {
		t.Fatalf("stats after autoAck: %v", st)
	}
}

func TestReceiveValidation(t *testing.T) {
	n := newNode(t)
	for _, c := range []struct {
		body any
		path string
	}{
		{map[string]any{"maxMessages": 0}, "maxMessages"},
		{map[string]any{"maxMessages": 1025}, "maxMessages"},
		{map[string]any{"visibilitySeconds": 0}, "visibilitySeconds"},
		{map[string]any{"visibilitySeconds": 43201}, "visibilitySeconds"},
		{map[string]any{"waitSeconds": -1}, "waitSeconds"},
		{map[string]any{"waitSeconds": 3601}, "waitSeconds"},
		{map[string]any{"isPeek": "yes"}, "isPeek"},
		{map[string]any{"isPeek": true, "autoAck": true}, "autoAck"},
		{map[string]any{"max": 1}, "max"},
	} {
		wantError(t, n.do(t, "POST", "/v1/queues/q/messages/receive", c.body), http.StatusBadRequest, "invalid_request", c.path)
	}
}

func TestReceiveMissingQueueWaitsAndReturnsEmpty(t *testing.T) {
	n := newNode(t)
	start := time.Now()
	body := n.must(t, http.StatusOK, "POST", "/v1/queues/nothing.here/messages/receive", map[string]any{"waitSeconds": 1})
	if len(objects(t, body["messages"])) != 0 {
		t.Fatalf("got %v", body)
	}
	if time.Since(start) < 900*time.Millisecond {
		t.Fatalf("returned after %s without waiting", time.Since(start))
	}
	// An empty body is {}: the defaults apply (a missing queue's wait is 1 s).
	n.must(t, http.StatusOK, "POST", "/v1/queues/nothing.here/messages/receive", nil)
}

func TestLongPollWokenBySend(t *testing.T) {
	n := newNode(t)
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/lp", nil)
	got := n.receiveAsync(t, "lp", map[string]any{"waitSeconds": 20})
	waitForWaiters(t, n)
	n.send(t, "lp", map[string]any{"body": "wake"})
	select {
	case msgs := <-got:
		if len(msgs) != 1 || msgs[0]["body"] != "wake" {
			t.Fatalf("woken receive got %v", msgs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting receive was not woken by the send")
	}
}

func TestLongPollWokenAcrossNodes(t *testing.T) {
	a := newNode(t)
	b := startNode(t, a.DB)
	a.must(t, http.StatusCreated, "PUT", "/v1/queues/x", nil)
	got := a.receiveAsync(t, "x", map[string]any{"waitSeconds": 20})
	waitForWaiters(t, a)
	b.send(t, "x", map[string]any{"body": "from b"})
	select {
	case msgs := <-got:
		if len(msgs) != 1 || msgs[0]["body"] != "from b" {
			t.Fatalf("got %v", msgs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a send on node b did not wake the receive waiting on node a")
	}
}

// waitForWaiters waits until a receive is parked on the node (its
// skipq_longpoll_waiters gauge), so what follows really tests a wake-up.
func waitForWaiters(t *testing.T, n *testNode) {
	t.Helper()
	eventually(t, 10*time.Second, "a parked receive", func() bool {
		resp, err := http.Get(n.URL + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, "skipq_longpoll_waiters "); ok {
				return v != "0"
			}
		}
		return false
	})
}

func TestConcurrentReceiversGetEachMessageOnce(t *testing.T) {
	n := newNode(t)
	const total = 500
	batch := make([]any, 0, 100)
	for i := range total {
		batch = append(batch, map[string]any{"body": fmt.Sprint(i)})
		if len(batch) == 100 {
			n.must(t, http.StatusCreated, "POST", "/v1/queues/c/messages/batch", map[string]any{"messages": batch})
			batch = batch[:0]
		}
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for {
				msgs := n.receive(offTest{t}, "c", map[string]any{"maxMessages": 7, "visibilitySeconds": 300})
				if len(msgs) == 0 {
					return
				}
				mu.Lock()
				for _, m := range msgs {
					seen[m["messageId"].(string)]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != total {
		t.Fatalf("received %d distinct messages, want %d", len(seen), total)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("message %s delivered %d times while its lease was live", id, c)
		}
	}
}
