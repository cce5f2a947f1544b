package apitest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/node"
)

// Topics, black box (the checks of the topics contract): a publish reaches
// every subscribed queue, each group consuming on its own.

// topic creates a topic and subscribes the queues to it (no filter).
func (n *testNode) topic(t *testing.T, name string, settings map[string]any, queues ...string) {
	t.Helper()
	if settings == nil {
		settings = map[string]any{}
	}
	n.must(t, http.StatusCreated, "PUT", "/v1/topics/"+name, settings)
	for _, q := range queues {
		n.must(t, http.StatusCreated, "PUT", "/v1/topics/"+name+"/subscriptions/"+q, nil)
	}
}

func (n *testNode) publish(t testing.TB, topic string, msg map[string]any) map[string]any {
	t.Helper()
	return n.must(t, http.StatusCreated, "POST", "/v1/topics/"+topic+"/messages", msg)
}

// drain receives from queue with consumers competing receivers, acking
// each message, until it stays empty; it returns how often each body came.
func (n *testNode) drain(t *testing.T, queue string, consumers int) map[string]int {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range consumers {
		wg.Go(func() {
			ot := offTest{t}
			for {
				msgs := n.receive(ot, queue, map[string]any{"maxMessages": 10, "waitSeconds": 1})
				if len(msgs) == 0 {
					return
				}
				handles := make([]string, len(msgs))
				mu.Lock()
				for i, m := range msgs {
					seen[m["body"].(string)]++
					handles[i] = m["receiptHandle"].(string)
				}
				mu.Unlock()
				n.must(ot, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandles": handles})
			}
		})
	}
	wg.Wait()
	return seen
}

func (n *testNode) depth(t *testing.T, queue string) int64 {
	t.Helper()
	q := n.must(t, http.StatusOK, "GET", "/v1/queues/"+queue, nil)
	return num(q["stats"].(map[string]any)["total"])
}

// 1. Two groups, 1,000 messages from 8 publishers: each group receives
// every message exactly once with three competing consumers, and one
// group's acks leave the other's copies alone.
func TestTopicEveryGroupGetsEveryMessageOnce(t *testing.T) {
	n := newNode(t)
	n.topic(t, "orders", nil, "billing", "shipping")
	var wg sync.WaitGroup
	for p := range 8 {
		wg.Go(func() {
			for i := range 125 {
				n.publish(offTest{t}, "orders", map[string]any{"body": fmt.Sprintf("m-%d-%d", p, i)})
			}
		})
	}
	wg.Wait()
	billing := n.drain(t, "billing", 3)
	if len(billing) != 1000 {
		t.Fatalf("billing received %d distinct messages, want 1000", len(billing))
	}
	for body, times := range billing {
		if times != 1 {
			t.Fatalf("billing received %q %d times", body, times)
		}
	}
	if d := n.depth(t, "shipping"); d != 1000 {
		t.Fatalf("after billing acked everything shipping holds %d, want 1000", d)
	}
	shipping := n.drain(t, "shipping", 3)
	if len(shipping) != 1000 {
		t.Fatalf("shipping received %d distinct messages, want 1000", len(shipping))
	}
	for body, times := range shipping {
		if times != 1 {
			t.Fatalf("shipping received %q %d times", body, times)
		}
	}
	tp := n.must(t, http.StatusOK, "GET", "/v1/topics/orders", nil)
	if num(tp["published"]) != 1000 || num(tp["delivered"]) != 2000 || num(tp["unrouted"]) != 0 {
		t.Fatalf("counters: %v", tp)
	}
}

// 2. A filter delivers exactly the matching messages; a message nothing
// matches is counted unrouted.
func TestTopicFilters(t *testing.T) {
	n := newNode(t)
	n.must(t, http.StatusCreated, "PUT", "/v1/topics/events", nil)
	n.must(t, http.StatusCreated, "PUT", "/v1/topics/events/subscriptions/eu-orders",
		map[string]any{"filter": map[string]any{"tags": map[string]any{"kind": []string{"order", "refund"}, "region": []string{"eu"}}}})
	n.must(t, http.StatusCreated, "PUT", "/v1/topics/events/subscriptions/refunds",
		map[string]any{"filter": map[string]any{"tags": map[string]any{"kind": []string{"refund"}}}})
	for _, m := range []struct {
		body       string
		tags       map[string]string
		deliveries int64
	}{
		{"eu-order", map[string]string{"kind": "order", "region": "eu"}, 1},
		{"eu-refund", map[string]string{"kind": "refund", "region": "eu"}, 2},
		{"us-refund", map[string]string{"kind": "refund", "region": "us"}, 1},
		{"eu-other", map[string]string{"kind": "signup", "region": "eu"}, 0},
		{"untagged", nil, 0},
	} {
		msg := map[string]any{"body": m.body}
		if m.tags != nil {
			msg["tags"] = m.tags
		}
		res := n.publish(t, "events", msg)
		if num(res["deliveredTo"]) != m.deliveries {
			t.Fatalf("%s reached %v groups, want %d", m.body, res["deliveredTo"], m.deliveries)
		}
	}
	bodies := func(queue string) map[string]int { return n.drain(t, queue, 1) }
	if got := bodies("eu-orders"); len(got) != 2 || got["eu-order"] != 1 || got["eu-refund"] != 1 {
		t.Fatalf("eu-orders got %v", got)
	}
	if got := bodies("refunds"); len(got) != 2 || got["eu-refund"] != 1 || got["us-refund"] != 1 {
		t.Fatalf("refunds got %v", got)
	}
	tp := n.must(t, http.StatusOK, "GET", "/v1/topics/events", nil)
	if num(tp["unrouted"]) != 2 || num(tp["published"]) != 5 || num(tp["delivered"]) != 4 {
		t.Fatalf("counters: %v", tp)
	}
	subs := objects(t, tp["subscriptions"])
	if len(subs) != 2 || subs[0]["queue"] != "eu-orders" || subs[0]["filter"] == nil || subs[1]["queue"] != "refunds" {
		t.Fatalf("subscriptions: %v", subs)
	}
}

// A publish writes most groups' copies in one insert and sends to a group
// whose queue traces or deduplicates by content on its own: every kind of
// group gets every message once, with its body, its delay, and in a traced
// queue its history.
func TestTopicReachesEveryKindOfGroup(t *testing.T) {
	n := newNode(t)
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/traced", map[string]any{"trace": true})
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/by-content", map[string]any{"contentBasedDeduplication": true})
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/slow", map[string]any{"delaySeconds": 1})
	n.topic(t, "kinds", nil, "plain-a", "traced", "by-content", "slow", "plain-b")
	res := n.must(t, http.StatusCreated, "POST", "/v1/topics/kinds/messages", map[string]any{"messages": []map[string]any{
		{"body": "same", "messageId": "k1"}, {"body": "same", "messageId": "k2"}, {"body": "other"}}})
	for _, r := range objects(t, res["results"]) {
		if num(r["deliveredTo"]) != 5 {
			t.Fatalf("results: %v", res)
		}
	}
	if msgs := n.receive(t, "slow", map[string]any{"maxMessages": 10}); len(msgs) != 0 {
		t.Fatalf("slow's copies came before its delay: %v", msgs)
	}
	for _, q := range []string{"plain-a", "traced", "by-content", "plain-b", "slow"} {
		if got := n.drain(t, q, 1); len(got) != 2 || got["same"] != 2 || got["other"] != 1 {
			t.Fatalf("%s got %v", q, got)
		}
	}
	if events := objects(t, n.must(t, http.StatusOK, "GET", "/v1/queues/traced/messages/k1/history", nil)["events"]); len(events) == 0 {
		t.Fatal("the traced group's copy has no history")
	}
}

// 3. Atomicity: an atomic batch with one invalid message reaches no group;
// with one group's queue row locked by another client's open transaction,
// a publish reaches both groups or neither.
func TestTopicPublishIsAtomic(t *testing.T) {
	n := newNode(t)
	n.topic(t, "tp", nil, "a", "b")
	r := n.do(t, "POST", "/v1/topics/tp/messages", map[string]any{"messages": []any{
		map[string]any{"body": "fine"}, map[string]any{"body": "bad", "delaySeconds": 1 << 30}}})
	wantError(t, r, http.StatusBadRequest, "invalid_request", "messages[1].delaySeconds")
	if n.depth(t, "a") != 0 || n.depth(t, "b") != 0 {
		t.Fatal("a refused batch reached a group")
	}

	conn := connect(t, n.DB)
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM skipq.queues WHERE name = 'b' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	res := <-n.doAsync(t, "POST", "/v1/topics/tp/messages", map[string]any{"body": "while locked"})
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	a, b := n.depth(t, "a"), n.depth(t, "b")
	switch {
	case res.Status == http.StatusCreated && a == 1 && b == 1:
	case res.Status != http.StatusCreated && a == 0 && b == 0:
	default:
		t.Fatalf("publish answered %d and reached a: %d, b: %d; want both or neither", res.Status, a, b)
	}
}

// 4. skipq.publish runs in the caller's transaction: a rollback reaches no
// group; a commit wakes a receiver waiting on each group within 100 ms.
func TestSQLPublishInTheCallersTransaction(t *testing.T) {
	n := newNode(t)
	n.topic(t, "outbox", nil, "a", "b")
	conn := connect(t, n.DB)
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var reached int
	if err := tx.QueryRow(ctx, "SELECT skipq.publish('outbox', 'rolled back')").Scan(&reached); err != nil || reached != 2 {
		t.Fatalf("publish in a transaction: %d %v", reached, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n.depth(t, "a") != 0 || n.depth(t, "b") != 0 {
		t.Fatal("a rolled-back publish reached a group")
	}

	waitA := n.receiveAsync(t, "a", map[string]any{"waitSeconds": 10})
	waitB := n.receiveAsync(t, "b", map[string]any{"waitSeconds": 10})
	time.Sleep(300 * time.Millisecond) // both receives parked
	if tx, err = conn.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT skipq.publish('outbox', 'committed', tags => '{\"k\": \"v\"}')"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	committed := time.Now()
	for name, wait := range map[string]<-chan []map[string]any{"a": waitA, "b": waitB} {
		msgs := <-wait
		if len(msgs) != 1 || msgs[0]["body"] != "committed" {
			t.Fatalf("the receiver waiting on %s got %v", name, msgs)
		}
		if tags := msgs[0]["tags"].(map[string]any); tags["skipq.topic"] != "outbox" || tags["k"] != "v" {
			t.Fatalf("the copy's tags: %v", tags)
		}
	}
	if waited := time.Since(committed); waited > 100*time.Millisecond {
		t.Fatalf("the waiting receivers answered %s after the commit, want within 100 ms", waited)
	}
	_, err = conn.Exec(ctx, "SELECT skipq.publish('missing', 'x')")
	if err == nil {
		t.Fatal("a SQL publish to a missing topic succeeded")
	}
}

// 5. Dedup across publishes, and 409 on a conflicting body.
func TestTopicDedup(t *testing.T) {
	n := newNode(t)
	n.topic(t, "tp", nil, "a", "b")
	first := n.publish(t, "tp", map[string]any{"body": "x", "messageId": "order-1"})
	again := n.must(t, http.StatusOK, "POST", "/v1/topics/tp/messages", map[string]any{"body": "x", "messageId": "order-1"})
	if again["duplicate"] != true || num(again["deliveredTo"]) != 2 || again["publishedAt"] != first["publishedAt"] {
		t.Fatalf("the second publish answered %v; want the first's %v as a duplicate", again, first)
	}
	if n.depth(t, "a") != 1 || n.depth(t, "b") != 1 {
		t.Fatal("a duplicate publish was delivered again")
	}
	r := n.do(t, "POST", "/v1/topics/tp/messages", map[string]any{"body": "other", "messageId": "order-1"})
	wantError(t, r, http.StatusConflict, "idempotency_conflict", "messageId")
	if n.depth(t, "a") != 1 || n.depth(t, "b") != 1 {
		t.Fatal("a conflicting publish was delivered")
	}
	// A batch repeating a key: the later position is a duplicate of the
	// first, and answers with its result.
	batch := n.publish(t, "tp", map[string]any{"messages": []any{
		map[string]any{"body": "y", "messageId": "order-2"}, map[string]any{"body": "y", "messageId": "order-2"}}})
	res := objects(t, batch["results"])
	if res[0]["duplicate"] != false || res[1]["duplicate"] != true || num(res[0]["deliveredTo"]) != 2 || num(res[1]["deliveredTo"]) != 2 {
		t.Fatalf("a batch repeating a key answered %v", res)
	}
	if n.depth(t, "a") != 2 || n.depth(t, "b") != 2 {
		t.Fatal("a key repeated in a batch was delivered twice")
	}
}

// 6. A nack loop in group a dead-letters a's copy only.
func TestTopicPerGroupDeadLetters(t *testing.T) {
	n := newNode(t)
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/a", map[string]any{"maxReceiveCount": 2, "deadLetterQueue": "a-dlq"})
	n.topic(t, "tp", nil, "a", "b")
	n.publish(t, "tp", map[string]any{"body": "poison", "messageId": "p1"})
	for range 2 {
		msgs := n.receive(t, "a", nil)
		if len(msgs) != 1 {
			t.Fatalf("a: %v", msgs)
		}
		n.must(t, http.StatusOK, "POST", "/v1/receipts/nack", map[string]any{"receiptHandle": msgs[0]["receiptHandle"]})
	}
	dead := n.receive(t, "a-dlq", nil)
	if len(dead) != 1 || dead[0]["body"] != "poison" || dead[0]["messageId"] != "p1" {
		t.Fatalf("a's dead letter: %v", dead)
	}
	b := n.receive(t, "b", nil)
	if len(b) != 1 || b[0]["body"] != "poison" || num(b[0]["receiveCount"]) != 1 {
		t.Fatalf("b's copy: %v", b)
	}
}

// 7. A FIFO topic: both groups see every groupId in publish order.
func TestFIFOTopicKeepsOrderInEveryGroup(t *testing.T) {
	n := newNode(t)
	n.topic(t, "ledger", map[string]any{"fifo": true}, "a", "b")
	r := n.do(t, "PUT", "/v1/topics/ledger/subscriptions/standard", nil)
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/plain", nil)
	wantError(t, n.do(t, "PUT", "/v1/topics/ledger/subscriptions/plain", nil), http.StatusBadRequest, "invalid_request", "queue")
	if r.Status != http.StatusCreated {
		t.Fatalf("subscribing a missing queue to a FIFO topic: %d %s", r.Status, r.Raw)
	}
	wantError(t, n.do(t, "POST", "/v1/topics/ledger/messages", map[string]any{"body": "x"}),
		http.StatusBadRequest, "invalid_request", "groupId")
	for i := range 20 {
		n.publish(t, "ledger", map[string]any{"body": fmt.Sprint(i), "groupId": fmt.Sprintf("g%d", i%3)})
	}
	for _, q := range []string{"a", "b"} {
		last := map[string]int{}
		for {
			msgs := n.receive(t, q, map[string]any{"maxMessages": 10, "maxMessagesPerGroup": 10})
			if len(msgs) == 0 {
				break
			}
			handles := []string{}
			for _, m := range msgs {
				var i int
				fmt.Sscan(m["body"].(string), &i)
				g := m["groupId"].(string)
				if prev, ok := last[g]; ok && i <= prev {
					t.Fatalf("%s got %d after %d in group %s", q, i, prev, g)
				}
				last[g] = i
				handles = append(handles, m["receiptHandle"].(string))
			}
			n.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandles": handles})
		}
		if last["g0"] != 18 || last["g1"] != 19 || last["g2"] != 17 {
			t.Fatalf("%s ended its groups at %v", q, last)
		}
	}
	wantError(t, n.do(t, "PUT", "/v1/topics/ledger", map[string]any{"fifo": false}), http.StatusConflict, "conflict")
}

// 8. Roles and tenants: write publishes and subscribes, admin manages
// topics; another tenant's topic is 404.
func TestTopicRolesAndTenants(t *testing.T) {
	n := newNode(t, func(c *node.Config) { c.Auth = "required" })
	pool := newPool(t, n.DB)
	_, read := createKey(t, pool, "t1", "read")
	_, write := createKey(t, pool, "t1", "write")
	_, admin := createKey(t, pool, "t1", "admin")
	_, other := createKey(t, pool, "t2", "admin")
	as := func(key, method, path string, body any) response {
		return n.do(t, method, path, body, "Authorization", "Bearer "+key)
	}
	want := func(r response, status int) {
		t.Helper()
		if r.Status != status {
			t.Fatalf("status %d, want %d: %s", r.Status, status, r.Raw)
		}
	}
	want(as(write, "PUT", "/v1/topics/tp", nil), http.StatusForbidden)
	want(as(admin, "PUT", "/v1/topics/tp", nil), http.StatusCreated)
	want(as(read, "PUT", "/v1/topics/tp/subscriptions/q", nil), http.StatusForbidden)
	want(as(write, "PUT", "/v1/topics/tp/subscriptions/q", nil), http.StatusCreated)
	want(as(read, "POST", "/v1/topics/tp/messages", map[string]any{"body": "x"}), http.StatusForbidden)
	want(as(write, "POST", "/v1/topics/tp/messages", map[string]any{"body": "x", "messageId": "m"}), http.StatusCreated)
	want(as(read, "GET", "/v1/topics/tp", nil), http.StatusOK)
	want(as(read, "GET", "/v1/topics/tp/messages/m", nil), http.StatusOK)
	want(as(other, "GET", "/v1/topics/tp", nil), http.StatusNotFound)
	want(as(other, "GET", "/v1/topics/tp/messages/m", nil), http.StatusNotFound)
	want(as(other, "POST", "/v1/topics/tp/messages", map[string]any{"body": "x"}), http.StatusNotFound)
	want(as(other, "PUT", "/v1/topics/tp/subscriptions/q", nil), http.StatusNotFound)
	want(as(other, "DELETE", "/v1/topics/tp", nil), http.StatusNotFound)
	if page := as(other, "GET", "/v1/topics", nil); len(objects(t, page.Body["topics"])) != 0 {
		t.Fatalf("t2 lists t1's topics: %s", page.Raw)
	}
	want(as(write, "DELETE", "/v1/topics/tp", nil), http.StatusForbidden)
	want(as(admin, "DELETE", "/v1/topics/tp", nil), http.StatusNoContent)
}

// 9. Deleting a topic leaves its queues and their messages; a publish to
// a missing topic is 404.
func TestTopicDeleteLeavesQueues(t *testing.T) {
	n := newNode(t)
	n.topic(t, "tp", nil, "a", "b")
	n.publish(t, "tp", map[string]any{"body": "kept"})
	n.must(t, http.StatusNoContent, "DELETE", "/v1/topics/tp", nil)
	wantError(t, n.do(t, "POST", "/v1/topics/tp/messages", map[string]any{"body": "x"}), http.StatusNotFound, "not_found")
	for _, q := range []string{"a", "b"} {
		msgs := n.receive(t, q, nil)
		if len(msgs) != 1 || msgs[0]["body"] != "kept" {
			t.Fatalf("%s after the topic's delete: %v", q, msgs)
		}
	}
	wantError(t, n.do(t, "GET", "/v1/topics/tp", nil), http.StatusNotFound, "not_found")
}

// 10. The message across groups shows each group's state as it changes.
func TestTopicMessageAcrossGroups(t *testing.T) {
	n := newNode(t)
	n.topic(t, "tp", nil, "a", "b")
	n.publish(t, "tp", map[string]any{"body": "x", "messageId": "m1"})
	states := func() map[string]map[string]any {
		t.Helper()
		out := map[string]map[string]any{}
		for _, g := range objects(t, n.must(t, http.StatusOK, "GET", "/v1/topics/tp/messages/m1", nil)["consumerGroups"]) {
			out[g["queue"].(string)] = g
		}
		return out
	}
	if s := states(); s["a"]["state"] != "available" || s["b"]["state"] != "available" || s["a"]["consumed"] != false {
		t.Fatalf("after the publish: %v", s)
	}
	msgs := n.receive(t, "a", nil)
	s := states()
	if s["a"]["state"] != "in_flight" || num(s["a"]["receiveCount"]) != 1 || s["a"]["leaseExpiresAt"] == nil ||
		s["b"]["state"] != "available" {
		t.Fatalf("after a's receive: %v", s)
	}
	n.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": msgs[0]["receiptHandle"]})
	if s := states(); s["a"]["state"] != "gone" || s["a"]["consumed"] != true || s["b"]["state"] != "available" {
		t.Fatalf("after a's ack: %v", s)
	}
}

// replayDone waits until no subscription of topic replays any more.
func (n *testNode) replayDone(t *testing.T, topic string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		replaying := false
		for _, s := range objects(t, n.must(t, http.StatusOK, "GET", "/v1/topics/"+topic, nil)["subscriptions"]) {
			replaying = replaying || s["replayFrom"] != nil
		}
		if !replaying {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s still replays", topic)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// inOrder receives every message of queue one consumer at a time, acking
// each, and returns their bodies in the order received.
func (n *testNode) inOrder(t *testing.T, queue string) []string {
	t.Helper()
	var out []string
	for {
		msgs := n.receive(t, queue, map[string]any{"maxMessages": 10})
		if len(msgs) == 0 {
			return out
		}
		handles := make([]string, len(msgs))
		for i, m := range msgs {
			out = append(out, m["body"].(string))
			handles[i] = m["receiptHandle"].(string)
		}
		n.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandles": handles})
	}
}

// Retention and replay: a new subscription with replayFrom gets, in
// publish order, the retained messages published since then that match its
// filter, then what is published after, also while it still replays.
func TestTopicReplayInPublishOrderThroughTheFilter(t *testing.T) {
	n := newNode(t)
	n.topic(t, "history", map[string]any{"retainSeconds": 3600}, "live")
	n.must(t, http.StatusCreated, "PUT", "/v1/topics/plain-topic", nil)
	r := n.do(t, "PUT", "/v1/topics/plain-topic/subscriptions/q", map[string]any{"replayFrom": time.Now().UTC().Format(time.RFC3339)})
	wantError(t, r, http.StatusBadRequest, "invalid_request", "replayFrom")

	n.publish(t, "history", map[string]any{"body": "before", "tags": map[string]string{"kind": "a"}})
	time.Sleep(20 * time.Millisecond)
	var from any
	var want []string
	for i := range 30 {
		kind := []string{"a", "b"}[i%2]
		res := n.publish(t, "history", map[string]any{"body": fmt.Sprintf("m%02d", i), "tags": map[string]string{"kind": kind}})
		if i == 0 {
			from = res["publishedAt"]
		}
		if kind == "a" {
			want = append(want, fmt.Sprintf("m%02d", i))
		}
	}
	n.must(t, http.StatusCreated, "PUT", "/v1/topics/history/subscriptions/replayed",
		map[string]any{"filter": map[string]any{"tags": map[string]any{"kind": []string{"a"}}}, "replayFrom": from})
	for i := range 5 {
		n.publish(t, "history", map[string]any{"body": fmt.Sprintf("new%d", i), "tags": map[string]string{"kind": "a"}})
		want = append(want, fmt.Sprintf("new%d", i))
	}
	n.replayDone(t, "history")
	n.publish(t, "history", map[string]any{"body": "last", "tags": map[string]string{"kind": "a"}})
	want = append(want, "last")
	if got := n.inOrder(t, "replayed"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the replayed group got\n %v\nwant\n %v", got, want)
	}
	if got := n.inOrder(t, "live"); len(got) != 1+30+5+1 {
		t.Fatalf("the live group got %d messages: %v", len(got), got)
	}
}

// A replay while publishers keep publishing: the replayed group gets every
// message published since replayFrom exactly once, as the live group does.
func TestTopicReplayWhilePublishing(t *testing.T) {
	n := newNode(t)
	n.topic(t, "busy", map[string]any{"retainSeconds": 3600}, "live")
	from := time.Now().UTC().Add(-time.Second).Format(time.RFC3339Nano)
	const publishers, each = 4, 150
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			ot := offTest{t}
			for i := range each {
				n.publish(ot, "busy", map[string]any{"messages": []map[string]any{
					{"body": fmt.Sprintf("p%d-%d-a", p, i)}, {"body": fmt.Sprintf("p%d-%d-b", p, i)}}})
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	n.must(t, http.StatusCreated, "PUT", "/v1/topics/busy/subscriptions/replayed", map[string]any{"replayFrom": from})
	wg.Wait()
	n.replayDone(t, "busy")
	for _, q := range []string{"live", "replayed"} {
		got := n.drain(t, q, 3)
		if len(got) != publishers*each*2 {
			t.Fatalf("%s got %d messages, want %d", q, len(got), publishers*each*2)
		}
		for body, times := range got {
			if times != 1 {
				t.Fatalf("%s got %s %d times", q, body, times)
			}
		}
	}
}

// Retention ends retainSeconds after a publish: the worker removes what a
// topic retained, and a replay asked for later finds nothing of it.
func TestTopicRetentionExpires(t *testing.T) {
	n := newNode(t)
	n.topic(t, "short", map[string]any{"retainSeconds": 1})
	res := n.publish(t, "short", map[string]any{"body": "gone-soon"})
	if num(res["deliveredTo"]) != 0 {
		t.Fatalf("publish: %v", res)
	}
	conn := connect(t, n.DB)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var left int
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM skipq.topic_retained").Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the retained message outlived its retention")
		}
		time.Sleep(200 * time.Millisecond)
	}
	n.must(t, http.StatusCreated, "PUT", "/v1/topics/short/subscriptions/late", map[string]any{"replayFrom": res["publishedAt"]})
	n.replayDone(t, "short")
	n.publish(t, "short", map[string]any{"body": "fresh"})
	if got := n.inOrder(t, "late"); fmt.Sprint(got) != "[fresh]" {
		t.Fatalf("late got %v", got)
	}
}

// A FIFO topic's replay keeps each groupId's order, retained messages
// first, then those published after.
func TestFIFOTopicReplayKeepsGroupOrder(t *testing.T) {
	n := newNode(t)
	n.topic(t, "fifo-log", map[string]any{"fifo": true, "retainSeconds": 3600}, "live")
	from := time.Now().UTC().Add(-time.Second).Format(time.RFC3339Nano)
	for i := range 12 {
		n.publish(t, "fifo-log", map[string]any{"body": fmt.Sprint(i), "groupId": fmt.Sprintf("g%d", i%3)})
	}
	n.must(t, http.StatusCreated, "PUT", "/v1/topics/fifo-log/subscriptions/replayed", map[string]any{"replayFrom": from})
	for i := 12; i < 18; i++ {
		n.publish(t, "fifo-log", map[string]any{"body": fmt.Sprint(i), "groupId": fmt.Sprintf("g%d", i%3)})
	}
	n.replayDone(t, "fifo-log")
	got := map[string][]int{}
	for {
		msgs := n.receive(t, "replayed", map[string]any{"maxMessages": 10, "maxMessagesPerGroup": 10})
		if len(msgs) == 0 {
			break
		}
		handles := []string{}
		for _, m := range msgs {
			var i int
			fmt.Sscan(m["body"].(string), &i)
			g := m["groupId"].(string)
			got[g] = append(got[g], i)
			handles = append(handles, m["receiptHandle"].(string))
		}
		n.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandles": handles})
	}
	for g := range 3 {
		var want []int
		for i := g; i < 18; i += 3 {
			want = append(want, i)
		}
		if fmt.Sprint(got[fmt.Sprintf("g%d", g)]) != fmt.Sprint(want) {
			t.Fatalf("group g%d got %v, want %v", g, got[fmt.Sprintf("g%d", g)], want)
		}
	}
}
