package apitest

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// searchIDs runs a search and returns the messageIds of every page,
// following nextCursor, and how many pages it took.
func searchIDs(t *testing.T, n *testNode, query string) (ids []string, pages int) {
	t.Helper()
	cursor := ""
	for {
		q := query
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		page := n.must(t, http.StatusOK, http.MethodGet, "/v1/messages?"+strings.TrimPrefix(q, "&"), nil)
		pages++
		for _, m := range objects(t, page["messages"]) {
			ids = append(ids, m["messageId"].(string))
		}
		next, _ := page["nextCursor"].(string)
		if next == "" {
			return ids, pages
		}
		if pages > 100 {
			t.Fatalf("%s: more than 100 pages", query)
		}
		cursor = next
	}
}

// Search across queues: each filter alone and combined
// returns exactly the expected messages, newest first; paging with a small
// limit visits every message once.
func TestSearchAcrossQueues(t *testing.T) {
	n := newNode(t)
	n.must(t, http.StatusCreated, http.MethodPut, "/v1/queues/orders.eu", map[string]any{"maxReceiveCount": 1, "deadLetterQueue": "orders.dlq"})
	// Sent one at a time, oldest first: a-1 … c-3 (c-3 newest).
	sent := map[string]time.Time{}
	for _, m := range []struct{ queue, id, tag string }{
		{"orders.eu", "a-1", "red"}, {"orders.us", "b-1", "blue"}, {"billing", "c-1", "red"},
		{"orders.eu", "a-2", "blue"}, {"orders.us", "b-2", "red"}, {"billing", "c-2", "blue"},
		{"orders.eu", "a-3", "red"}, {"billing", "c-3", "red"},
	} {
		res := n.must(t, http.StatusCreated, http.MethodPost, "/v1/queues/"+m.queue+"/messages",
			map[string]any{"body": m.id, "messageId": m.id, "tags": map[string]string{"color": m.tag}})
		at, err := time.Parse(time.RFC3339Nano, res["sentAt"].(string))
		if err != nil {
			t.Fatal(err)
		}
		sent[m.id] = at
		time.Sleep(2 * time.Millisecond) // distinct sentAt milliseconds, for the time filters
	}
	// a-1 stays received (in flight); a-2 goes to orders.dlq by a nack on
	// its last allowed delivery (orders.eu allows 1); c-4 is delayed.
	inFlight := n.receive(t, "orders.eu", map[string]any{"maxMessages": 2, "waitSeconds": 0})
	if len(inFlight) != 2 {
		t.Fatalf("received %d, want a-1 and a-2", len(inFlight))
	}
	for _, m := range inFlight {
		if m["messageId"] == "a-2" {
			n.must(t, http.StatusOK, http.MethodPost, "/v1/receipts/nack", map[string]any{"receiptHandle": m["receiptHandle"]})
		}
	}
	n.must(t, http.StatusCreated, http.MethodPost, "/v1/queues/billing/messages",
		map[string]any{"body": "later", "messageId": "c-4", "delaySeconds": 600, "tags": map[string]string{"color": "red"}})

	all := []string{"c-4", "c-3", "a-3", "c-2", "b-2", "a-2", "c-1", "b-1", "a-1"} // newest first
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"", all},
		{"&queue=orders.eu", []string{"a-3", "a-1"}},
		{"&queue=orders.dlq", []string{"a-2"}},
		{"&queue=orders.eu&queue=billing", []string{"c-4", "c-3", "a-3", "c-2", "c-1", "a-1"}},
		{"&queuePrefix=orders.", []string{"a-3", "b-2", "a-2", "b-1", "a-1"}},
		{"&state=in_flight", []string{"a-1"}},
		{"&state=delayed", []string{"c-4"}},
		{"&state=dead_lettered", []string{"a-2"}},
		// a-2 waits in orders.dlq: available there, and dead_lettered as a filter.
		{"&state=available&queuePrefix=orders.", []string{"a-3", "b-2", "a-2", "b-1"}},
		{"&state=delayed&state=in_flight", []string{"c-4", "a-1"}},
		{"&state=acked", nil},
		{"&tag=color:red", []string{"c-4", "c-3", "a-3", "b-2", "c-1", "a-1"}},
		{"&tag=color:red&queue=billing&state=available", []string{"c-3", "c-1"}},
		{"&messageId=b-2", []string{"b-2"}},
		{"&messageId=b-2&queue=billing", nil},
		{"&sentAfter=" + url.QueryEscape(sent["c-2"].Format(time.RFC3339Nano)) + "&sentBefore=" + url.QueryEscape(sent["c-3"].Format(time.RFC3339Nano)),
			[]string{"a-3", "c-2"}},
	} {
		for _, limit := range []int{100, 2, 1} {
			got, pages := searchIDs(t, n, fmt.Sprintf("limit=%d%s", limit, c.query))
			if !slices.Equal(got, c.want) {
				t.Errorf("search %q limit %d: got %v, want %v", c.query, limit, got, c.want)
			}
			if limit == 1 && pages < len(c.want) {
				t.Errorf("search %q limit 1: %d pages for %d messages", c.query, pages, len(c.want))
			}
		}
	}
	// Every item carries its queue and state.
	page := n.must(t, http.StatusOK, http.MethodGet, "/v1/messages?messageId=a-2", nil)
	m := objects(t, page["messages"])[0]
	if m["queue"] != "orders.dlq" || m["state"] != "available" || m["reRoutedFrom"] != "orders.eu" {
		t.Fatalf("a-2 reported as %v in %v from %v", m["state"], m["queue"], m["reRoutedFrom"])
	}
	// Bad filters are 400s at their names.
	for q, path := range map[string]string{
		"state=done": "state", "sentAfter=yesterday": "sentAfter", "tag=color": "tag",
		"queue=a&queuePrefix=b": "queuePrefix", "limit=0": "limit", "cursor=zz": "cursor",
		"queue=" + strings.Repeat("&queue=x", 20): "queue", "tag=a:1&tag=a:2": "tag",
	} {
		wantError(t, n.do(t, http.MethodGet, "/v1/messages?"+q, nil), http.StatusBadRequest, "invalid_request", path)
	}
}

// groupId (docs/API.md#search) finds a FIFO group's messages in every queue
// searched, newest first, with the other filters and paging.
func TestSearchByGroup(t *testing.T) {
	n := newNode(t)
	for _, q := range []string{"f1", "f2"} {
		n.must(t, http.StatusCreated, http.MethodPut, "/v1/queues/"+q, map[string]any{"fifo": true})
	}
	// Oldest first: x-1 … x-7.
	for _, m := range []struct{ queue, id, group string }{
		{"f1", "x-1", "g1"}, {"f2", "x-2", "g1"}, {"f1", "x-3", "g2"}, {"f1", "x-4", "g1"},
		{"f2", "x-5", "g2"}, {"f2", "x-6", "g1"}, {"f1", "x-7", "g10"},
	} {
		n.must(t, http.StatusCreated, http.MethodPost, "/v1/queues/"+m.queue+"/messages",
			map[string]any{"body": m.id, "messageId": m.id, "groupId": m.group})
	}
	n.send(t, "plain", map[string]any{"body": "x-8", "messageId": "x-8"})
	// f1's g1 head (x-1) is received: in flight, and x-4 waits behind it.
	if got := n.receive(t, "f1", map[string]any{"maxMessages": 1}); len(got) != 1 || got[0]["messageId"] != "x-1" {
		t.Fatalf("received %v, want x-1", got)
	}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"&groupId=g1", []string{"x-6", "x-4", "x-2", "x-1"}},
		{"&groupId=g2", []string{"x-5", "x-3"}},
		{"&groupId=g1&queue=f2", []string{"x-6", "x-2"}},
		{"&groupId=g1&queue=plain", nil},
		{"&groupId=g1&state=in_flight", []string{"x-1"}},
		{"&groupId=g1&state=available&queuePrefix=f", []string{"x-6", "x-4", "x-2"}},
		{"&groupId=g1&messageId=x-4", []string{"x-4"}},
		{"&groupId=g2&messageId=x-4", nil},
		{"&groupId=g", nil},
	} {
		for _, limit := range []int{100, 1} {
			if got, _ := searchIDs(t, n, fmt.Sprintf("limit=%d%s", limit, c.query)); !slices.Equal(got, c.want) {
				t.Errorf("search %q limit %d: got %v, want %v", c.query, limit, got, c.want)
			}
		}
	}
	page := n.must(t, http.StatusOK, http.MethodGet, "/v1/messages?groupId=g10", nil)
	if m := objects(t, page["messages"]); len(m) != 1 || m[0]["groupId"] != "g10" || m[0]["queue"] != "f1" {
		t.Fatalf("groupId g10: %v", m)
	}
	wantError(t, n.do(t, http.MethodGet, "/v1/messages?groupId=a/b", nil), http.StatusBadRequest, "invalid_request", "groupId")
	wantError(t, n.do(t, http.MethodGet, "/v1/messages?groupId=a&groupId=b", nil), http.StatusBadRequest, "invalid_request", "groupId")
}

// A dead letter's state is the same on every route: available in its
// dead-letter queue, as any message there (lookup, browse, search, the
// search by messageId), and in flight once received from there; the
// dead_lettered filter finds it until then, and only then.
func TestDeadLetterStateOnEveryRoute(t *testing.T) {
	n := newNode(t)
	n.must(t, http.StatusCreated, http.MethodPut, "/v1/queues/work", map[string]any{"maxReceiveCount": 1, "deadLetterQueue": "work.dlq"})
	n.send(t, "work", map[string]any{"body": "x", "messageId": "dl-1"})
	got := n.receive(t, "work", map[string]any{"waitSeconds": 0})
	n.must(t, http.StatusOK, http.MethodPost, "/v1/receipts/nack", map[string]any{"receiptHandle": got[0]["receiptHandle"]})

	states := func() map[string]any {
		t.Helper()
		out := map[string]any{}
		out["lookup"] = n.must(t, http.StatusOK, http.MethodGet, "/v1/queues/work.dlq/messages/dl-1", nil)["state"]
		for _, route := range []string{"/v1/queues/work.dlq/messages", "/v1/messages?queue=work.dlq", "/v1/messages?messageId=dl-1"} {
			page := objects(t, n.must(t, http.StatusOK, http.MethodGet, route, nil)["messages"])
			if len(page) != 1 {
				t.Fatalf("%s: %d messages, want dl-1", route, len(page))
			}
			out[route] = page[0]["state"]
		}
		return out
	}
	dead := func(filter string) []string {
		t.Helper()
		ids, _ := searchIDs(t, n, "queue=work.dlq&state="+filter)
		return ids
	}
	for route, st := range states() {
		if st != "available" {
			t.Errorf("waiting in the dead-letter queue, %s says %v, want available", route, st)
		}
	}
	if m := n.must(t, http.StatusOK, http.MethodGet, "/v1/queues/work.dlq/messages/dl-1", nil); m["deadLetteredAt"] == nil || m["deadLetter"] == nil {
		t.Errorf("the lookup does not say it is a dead letter: %v", m)
	}
	if ids := dead("dead_lettered"); !slices.Equal(ids, []string{"dl-1"}) {
		t.Errorf("state=dead_lettered: %v", ids)
	}
	if ids := dead("available"); !slices.Equal(ids, []string{"dl-1"}) {
		t.Errorf("state=available: %v", ids)
	}
	if ids := n.must(t, http.StatusOK, http.MethodGet, "/v1/queues/work.dlq/messages?state=available", nil); len(objects(t, ids["messages"])) != 1 {
		t.Errorf("browse state=available: %v", ids)
	}
	// Received from the dead-letter queue: in flight everywhere, and no
	// longer found as waiting.
	if got := n.receive(t, "work.dlq", map[string]any{"waitSeconds": 0}); len(got) != 1 {
		t.Fatalf("received %d from the dead-letter queue", len(got))
	}
	for route, st := range states() {
		if st != "in_flight" {
			t.Errorf("received from the dead-letter queue, %s says %v, want in_flight", route, st)
		}
	}
	if ids := dead("dead_lettered"); len(ids) != 0 {
		t.Errorf("state=dead_lettered after its receive: %v", ids)
	}
}
