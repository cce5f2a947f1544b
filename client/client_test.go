package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skipq/skipq/client"
	"github.com/skipq/skipq/internal/node/nodetest"
	"github.com/skipq/skipq/internal/testdb"
)

// ---------------------------------------------------------------------------
// Helpers

// startNode runs a node with auth off on a fresh database until the test
// ends and returns its base URL.
func startNode(t *testing.T) string {
	t.Helper()
	return nodetest.Start(t, testdb.New(t))
}

func newClient(t *testing.T, baseURL string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(baseURL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fresh is an http.Client that opens a new connection for every request, so
// that net/http never replays a request on its own and every attempt the
// proxy counts is one the skipq client made.
func fresh() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func asError(t *testing.T, err error) *client.Error {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) {
		t.Fatalf("want a *client.Error, got %T: %v", err, err)
	}
	if e.RequestID == "" || e.Message == "" {
		t.Fatalf("incomplete error: %#v", e)
	}
	return e
}

func wantCode(t *testing.T, err error, status int, code string) *client.Error {
	t.Helper()
	e := asError(t, err)
	if e.Status != status || e.Code != code {
		t.Fatalf("got %d %s, want %d %s: %v", e.Status, e.Code, status, code, err)
	}
	return e
}

func hasIssue(e *client.Error, path string) bool {
	return slices.ContainsFunc(e.Issues, func(is client.Issue) bool { return is.Path == path })
}

// eventually polls cond until it holds (it is a wait, not an assertion of
// speed: the timeout only stops a broken test).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func total(t *testing.T, c *client.Client, queue string) int64 {
	t.Helper()
	q, err := c.GetQueue(context.Background(), queue)
	if err != nil {
		t.Fatal(err)
	}
	return q.Stats.Total
}

func receive(t *testing.T, c *client.Client, queue string, max int) []*client.Received {
	t.Helper()
	msgs, err := c.Receive(context.Background(), queue, client.ReceiveOptions{MaxMessages: max, WaitSeconds: new(0)})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func text(s string) client.Message { return client.Message{Body: []byte(s)} }

// syncBuffer is a log sink for a consumer.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ---------------------------------------------------------------------------
// A proxy in front of the node that counts requests, records which receipt
// handles each settle route settled, and injects faults.

type fault int

const (
	pass            fault = iota
	answer503             // 503 unavailable, Retry-After: 0
	answer503Later        // 503 unavailable, Retry-After: 1
	answer429             // 429 too_many_requests, Retry-After: 0
	dropConn              // read the request, close the connection, forward nothing
	forwardThenDrop       // forward, then close the connection instead of answering
)

type proxy struct {
	*httptest.Server
	rp *httputil.ReverseProxy

	mu       sync.Mutex
	seen     map[string]int                // "METHOD /path" → requests
	since    map[string]int                // the same, since the last setFault
	settled  map[string]map[string]int     // handle → route → successes
	statuses map[string]map[int]int        // receipt route → status → answers
	faultFn  func(key string, n int) fault // n: 1 for the first request with this key since setFault
}

type handlesKey struct{}

func newProxy(t *testing.T, nodeURL string) *proxy {
	t.Helper()
	target, err := url.Parse(nodeURL)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{rp: httputil.NewSingleHostReverseProxy(target),
		seen: map[string]int{}, since: map[string]int{}, settled: map[string]map[string]int{}, statuses: map[string]map[int]int{}}
	p.rp.ModifyResponse = p.record
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

func (p *proxy) setFault(f func(key string, n int) fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faultFn = f
	clear(p.since)
}

// failFirst injects f into the first n requests whose key ends with suffix.
func (p *proxy) failFirst(suffix string, n int, f fault) {
	p.setFault(func(key string, i int) fault {
		if strings.HasSuffix(key, suffix) && i <= n {
			return f
		}
		return pass
	})
}

func (p *proxy) count(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[key]
}

// settles returns how often each handle was settled by a successful answer
// of the given routes.
func (p *proxy) settles(routes ...string) map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for h, byRoute := range p.settled {
		for _, r := range routes {
			if byRoute[r] > 0 {
				out[h] += byRoute[r]
			}
		}
	}
	return out
}

func (p *proxy) answers(route string, status int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.statuses[route][status]
}

func (p *proxy) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	key := r.Method + " " + r.URL.Path
	p.mu.Lock()
	p.seen[key]++
	p.since[key]++
	n := p.since[key]
	f := pass
	if p.faultFn != nil {
		f = p.faultFn(key, n)
	}
	p.mu.Unlock()

	if strings.HasPrefix(r.URL.Path, "/v1/receipts/") || isReceive(r.URL.Path) {
		var in struct {
			ReceiptHandle  string   `json:"receiptHandle"`
			ReceiptHandles []string `json:"receiptHandles"`
			Ack            []string `json:"ack"` // a receive's acks
		}
		_ = json.Unmarshal(body, &in)
		hs := in.ReceiptHandles
		if in.ReceiptHandle != "" {
			hs = []string{in.ReceiptHandle}
		}
		if isReceive(r.URL.Path) {
			hs = in.Ack
		}
		r = r.WithContext(context.WithValue(r.Context(), handlesKey{}, hs))
	}
	switch f {
	case answer503, answer503Later, answer429:
		status, code, after := http.StatusServiceUnavailable, "unavailable", "0"
		if f == answer429 {
			status, code = http.StatusTooManyRequests, "too_many_requests"
		}
		if f == answer503Later {
			after = "1"
		}
		w.Header().Set("Retry-After", after)
		w.Header().Set("X-Request-Id", "proxy")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"code":%q,"message":"injected","requestId":"proxy"}}`, code)
	case dropConn:
		closeConn(w)
	case forwardThenDrop:
		p.rp.ServeHTTP(httptest.NewRecorder(), r)
		closeConn(w)
	default:
		p.rp.ServeHTTP(w, r)
	}
}

func closeConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

// isReceive reports whether a request path is a receive's.
func isReceive(p string) bool { return strings.HasSuffix(p, "/messages/receive") }

// record notes which handles a receipt route settled, and the acks a
// receive carried ("ack"), as the ack route's: each failed entry of those
// counts as a 404 of the ack route, the answer a single-form ack of that
// handle would have had.
func (p *proxy) record(resp *http.Response) error {
	receive := isReceive(resp.Request.URL.Path)
	handles, _ := resp.Request.Context().Value(handlesKey{}).([]string)
	if !strings.HasPrefix(resp.Request.URL.Path, "/v1/receipts/") && (!receive || len(handles) == 0) {
		return nil
	}
	route := path.Base(resp.Request.URL.Path)
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	var out struct {
		Failed []struct {
			ReceiptHandle string `json:"receiptHandle"`
		} `json:"failed"`
	}
	if receive {
		route = "ack"
		var received struct {
			Acked json.RawMessage `json:"acked"`
		}
		_ = json.Unmarshal(raw, &received)
		_ = json.Unmarshal(received.Acked, &out)
	} else {
		_ = json.Unmarshal(raw, &out)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.statuses[route] == nil {
		p.statuses[route] = map[int]int{}
	}
	if receive {
		p.statuses[route][http.StatusNotFound] += len(out.Failed)
		p.statuses[route][resp.StatusCode] += len(handles) - len(out.Failed)
	} else {
		p.statuses[route][resp.StatusCode]++
	}
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	for _, h := range handles {
		if slices.ContainsFunc(out.Failed, func(f struct {
			ReceiptHandle string `json:"receiptHandle"`
		}) bool {
			return f.ReceiptHandle == h
		}) {
			continue
		}
		if p.settled[h] == nil {
			p.settled[h] = map[string]int{}
		}
		p.settled[h][route]++
	}
	return nil
}

// ---------------------------------------------------------------------------
// Queues and service routes

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "127.0.0.1:8080", "ftp://x", "http://", "http://x/?a=b"} {
		if _, err := client.New(bad); err == nil {
			t.Errorf("New(%q): no error", bad)
		}
	}
	if _, err := client.New("http://x", client.WithRetry(0, 0, 0)); err == nil {
		t.Error("WithRetry(0, …): no error")
	}
	if _, err := client.New("http://x", client.WithRetry(3, time.Second, time.Millisecond)); err == nil {
		t.Error("WithRetry with maxDelay < baseDelay: no error")
	}

	// The API key, a path prefix, escaping, and one request id for all
	// attempts of a call.
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization")+" "+r.URL.EscapedPath()+" "+r.Header.Get("X-Request-Id"))
		first := len(seen) == 1
		mu.Unlock()
		if first {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"name": "a b", "createdAt": "2026-11-29T15:04:05.123Z", "stats": {"total": 3}}`)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL+"/prefix/", client.WithAPIKey("sekret"), client.WithHTTPClient(fresh()))
	q, err := c.GetQueue(context.Background(), "a b")
	if err != nil || q.Name != "a b" || q.Stats.Total != 3 || q.CreatedAt.Nanosecond() != 123000000 {
		t.Fatalf("GetQueue: %+v %v", q, err)
	}
	if len(seen) != 2 || seen[0] != seen[1] || !strings.HasPrefix(seen[0], "Bearer sekret /prefix/v1/queues/a%20b go-") {
		t.Fatalf("requests: %q", seen)
	}
}

func TestQueues(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	c := newClient(t, startNode(t))

	if err := c.Health(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	doc := must[json.RawMessage](t)(c.OpenAPI(ctx))
	if !bytes.Contains(doc, []byte(`"/v1/queues/{queue}"`)) {
		t.Fatalf("OpenAPI document without the queue route: %.200s", doc)
	}

	q, created, err := c.PutQueue(ctx, "orders", client.QueueSettings{
		VisibilitySeconds: new(45), MaxReceiveCount: new(5), DeadLetterQueue: new("orders.dlq")})
	if err != nil || !created {
		t.Fatalf("create: created %v, err %v", created, err)
	}
	if q.Name != "orders" || q.VisibilitySeconds != 45 || q.MaxReceiveCount != 5 || q.DeadLetterQueue != "orders.dlq" ||
		q.ReceiveWaitSeconds != 1 || q.DedupWindowSeconds != 300 || q.CreatedAt.IsZero() {
		t.Fatalf("created queue: %+v", q)
	}
	q, created, err = c.PutQueue(ctx, "orders", client.QueueSettings{DelaySeconds: new(0), ReceiveWaitSeconds: new(3)})
	if err != nil || created {
		t.Fatalf("update: created %v, err %v", created, err)
	}
	if q.VisibilitySeconds != 45 || q.ReceiveWaitSeconds != 3 || q.DeadLetterQueue != "orders.dlq" {
		t.Fatalf("update did not keep the other settings: %+v", q)
	}

	q = must[client.Queue](t)(c.GetQueue(ctx, "orders"))
	if q.Stats == nil || q.Stats.Total != 0 || q.Stats.OldestAvailableAt != nil {
		t.Fatalf("stats of an empty queue: %+v", q.Stats)
	}
	must[[]client.SendResult](t)(c.SendBatch(ctx, "orders", []client.Message{text("a"), text("b")}))
	q = must[client.Queue](t)(c.GetQueue(ctx, "orders"))
	if q.Stats.Available != 2 || q.Stats.Total != 2 || q.Stats.OldestAvailableAt == nil {
		t.Fatalf("stats after two sends: %+v", q.Stats)
	}
	// With retention, an ack keeps the message, counted apart.
	if q, _, err = c.PutQueue(ctx, "orders", client.QueueSettings{RetainAckedSeconds: new(600)}); err != nil ||
		q.RetainAckedSeconds != 600 {
		t.Fatalf("retainAckedSeconds: %+v %v", q, err)
	}
	recv := must[[]*client.Received](t)(c.Receive(ctx, "orders", client.ReceiveOptions{WaitSeconds: new(0)}))
	if len(recv) != 1 || recv[0].Ack(ctx) != nil {
		t.Fatalf("receive and ack: %v", recv)
	}
	q = must[client.Queue](t)(c.GetQueue(ctx, "orders"))
	if q.Stats.Acked != 1 || q.Stats.Available != 1 || q.Stats.Total != 1 {
		t.Fatalf("stats after an ack with retention: %+v", q.Stats)
	}
	kept := must[client.BrowsedMessage](t)(c.GetMessage(ctx, "orders", recv[0].MessageID))
	if kept.State != client.StateAcked || kept.AckedAt == nil || !kept.VisibleAt.IsZero() {
		t.Fatalf("retained message: %+v", kept)
	}
	if n := must[int64](t)(c.PurgeQueue(ctx, "orders")); n != 2 {
		t.Fatalf("purged %d, want 2", n)
	}
	if total(t, c, "orders") != 0 {
		t.Fatal("purge left messages")
	}

	// A name that needs escaping in a path.
	weird := "we?ird#na%me:1"
	if _, _, err := c.PutQueue(ctx, weird, client.QueueSettings{}); err != nil {
		t.Fatal(err)
	}
	if q := must[client.Queue](t)(c.GetQueue(ctx, weird)); q.Name != weird {
		t.Fatalf("got queue %q, want %q", q.Name, weird)
	}

	// Pages and the iterator, across more than one page of 100.
	var names []string
	for i := range 120 {
		name := fmt.Sprintf("many.%03d", i)
		names = append(names, name)
		if _, _, err := c.PutQueue(ctx, name, client.QueueSettings{}); err != nil {
			t.Fatal(err)
		}
	}
	page, next, err := c.ListQueues(ctx, client.ListQueuesOptions{Prefix: "many.", Limit: 50})
	if err != nil || len(page) != 50 || next == "" || page[0].Name != "many.000" {
		t.Fatalf("first page: %d queues, next %q, err %v", len(page), next, err)
	}
	page, _, err = c.ListQueues(ctx, client.ListQueuesOptions{Prefix: "many.", Limit: 50, Cursor: next})
	if err != nil || len(page) != 50 || page[0].Name != "many.050" {
		t.Fatalf("second page: %d queues, err %v", len(page), err)
	}
	var got []string
	for q, err := range c.Queues(ctx, "many.") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, q.Name)
	}
	if !slices.Equal(got, names) {
		t.Fatalf("Queues yielded %d names, want %d in order", len(got), len(names))
	}
	seen := 0
	for range c.Queues(ctx, "many.") {
		if seen++; seen == 3 {
			break
		}
	}

	if err := c.DeleteQueue(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetQueue(ctx, "orders"); !client.IsNotFound(err) {
		t.Fatalf("GetQueue after delete: %v", err)
	}
	if err := c.DeleteQueue(ctx, "orders"); !client.IsNotFound(err) {
		t.Fatalf("second DeleteQueue: %v", err)
	}
	if _, err := c.PurgeQueue(ctx, "orders"); !client.IsNotFound(err) {
		t.Fatalf("PurgeQueue of a missing queue: %v", err)
	}
}

// ---------------------------------------------------------------------------
// Send, receive, bodies

func TestSendReceive(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	c := newClient(t, startNode(t))

	res, err := c.Send(ctx, "in", client.Message{Body: []byte("héllo"), Metadata: "meta", ClientID: "me",
		Tags: map[string]string{"kind": "greeting"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.MessageID == "" || res.Sequence == 0 || res.SentAt.IsZero() || res.Duplicate || res.DelayedTo != nil || res.ExpiresAt != nil {
		t.Fatalf("send result: %+v", res)
	}
	msgs := receive(t, c, "in", 10)
	if len(msgs) != 1 {
		t.Fatalf("received %d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if m.MessageID != res.MessageID || m.Sequence != res.Sequence || !m.SentAt.Equal(res.SentAt.Time) ||
		string(m.Body) != "héllo" || m.Binary || m.Metadata != "meta" || m.ClientID != "me" ||
		m.Tags["kind"] != "greeting" || m.Queue != "in" || m.ReceiveCount != 1 || m.ReceiptHandle == "" ||
		m.FirstReceivedAt == nil || m.VisibleUntil == nil || !m.VisibleUntil.After(m.SentAt.Time) || m.ReRoutedFrom != "" {
		t.Fatalf("received: %+v", m)
	}
	if err := m.Ack(ctx); err != nil {
		t.Fatal(err)
	}

	// Bodies: binary, text sent as binary, invalid UTF-8 (always base64),
	// metadata only; an expiration and a delay.
	bin := []byte{0, 1, 2, 0xfe, 0xff}
	batch := []client.Message{
		{Body: bin, Binary: true},
		{Body: []byte("plain"), Binary: true},
		{Body: []byte{'a', 0xff, 'b'}},
		{Metadata: "only metadata"},
		{Body: []byte("expiring"), ExpirationSeconds: new(600)},
	}
	results := must[[]client.SendResult](t)(c.SendBatch(ctx, "in", batch))
	if len(results) != len(batch) {
		t.Fatalf("%d results for %d messages", len(results), len(batch))
	}
	for i := 1; i < len(results); i++ {
		if results[i].Sequence <= results[i-1].Sequence {
			t.Fatalf("results out of order: %+v", results)
		}
	}
	if results[4].ExpiresAt == nil {
		t.Fatalf("no expiresAt: %+v", results[4])
	}
	msgs = receive(t, c, "in", 10)
	if len(msgs) != len(batch) {
		t.Fatalf("received %d, want %d", len(msgs), len(batch))
	}
	want := []struct {
		body   []byte
		binary bool
	}{{bin, true}, {[]byte("plain"), true}, {[]byte{'a', 0xff, 'b'}, true}, {[]byte{}, false}, {[]byte("expiring"), false}}
	for i, w := range want {
		if !bytes.Equal(msgs[i].Body, w.body) || msgs[i].Binary != w.binary || msgs[i].MessageID != results[i].MessageID {
			t.Errorf("message %d: body %q binary %v, want %q %v", i, msgs[i].Body, msgs[i].Binary, w.body, w.binary)
		}
	}
	if msgs[3].Metadata != "only metadata" || msgs[4].ExpiresAt == nil {
		t.Errorf("metadata %q, expiresAt %v", msgs[3].Metadata, msgs[4].ExpiresAt)
	}
	handles := make([]string, len(msgs))
	for i, m := range msgs {
		handles[i] = m.ReceiptHandle
	}
	if r, err := c.AckAll(ctx, handles); err != nil || r.Succeeded != len(msgs) || len(r.Failed) != 0 {
		t.Fatalf("AckAll: %+v, %v", r, err)
	}

	// A delayed message is not received; it is browsed as delayed.
	d := must[client.SendResult](t)(c.Send(ctx, "in", client.Message{Body: []byte("later"), DelaySeconds: new(600)}))
	if d.DelayedTo == nil {
		t.Fatalf("no delayedTo: %+v", d)
	}
	if got := receive(t, c, "in", 1); len(got) != 0 {
		t.Fatalf("received a delayed message: %+v", got[0])
	}

	// Idempotency keys.
	first := must[client.SendResult](t)(c.Send(ctx, "keys", client.Message{Body: []byte("x"), MessageID: "k-1"}))
	again := must[client.SendResult](t)(c.Send(ctx, "keys", client.Message{Body: []byte("x"), MessageID: "k-1"}))
	if first.MessageID != "k-1" || first.Duplicate || !again.Duplicate || again.Sequence != first.Sequence {
		t.Fatalf("first %+v, again %+v", first, again)
	}
	_, err = c.Send(ctx, "keys", client.Message{Body: []byte("y"), MessageID: "k-1"})
	if !client.IsConflict(err) {
		t.Fatalf("different content, same id: %v", err)
	}
	wantCode(t, err, http.StatusConflict, client.CodeIdempotencyConflict)

	// Peek changes nothing and has no handle.
	peeked := must[[]client.StoredMessage](t)(c.Peek(ctx, "keys", client.PeekOptions{MaxMessages: 5, WaitSeconds: new(0)}))
	if len(peeked) != 1 || peeked[0].MessageID != "k-1" || peeked[0].ReceiveCount != 0 {
		t.Fatalf("peek: %+v", peeked)
	}

	// AutoAck removes what it returns; there is nothing to settle.
	auto, err := c.Receive(ctx, "keys", client.ReceiveOptions{AutoAck: true, WaitSeconds: new(0)})
	if err != nil || len(auto) != 1 || auto[0].ReceiptHandle != "" || auto[0].ReceiveCount != 1 {
		t.Fatalf("autoAck: %+v, %v", auto, err)
	}
	if err := auto[0].Ack(ctx); !errors.Is(err, client.ErrNoReceipt) {
		t.Fatalf("Ack of an autoAck message: %v", err)
	}
	if total(t, c, "keys") != 0 {
		t.Fatal("autoAck left the message")
	}

	// A long poll returns as soon as a message arrives.
	got := make(chan []*client.Received, 1)
	go func() {
		msgs, err := c.Receive(ctx, "wait", client.ReceiveOptions{WaitSeconds: new(30)})
		if err != nil {
			t.Error(err)
		}
		got <- msgs
	}()
	if _, err := c.Send(ctx, "wait", text("woken")); err != nil {
		t.Fatal(err)
	}
	if msgs := <-got; len(msgs) != 1 || string(msgs[0].Body) != "woken" {
		t.Fatalf("long poll got %+v", msgs)
	}
}

// ---------------------------------------------------------------------------
// Settle

func TestSendEach(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	c := newClient(t, startNode(t))
	entries := must[[]client.BatchEntry](t)(c.SendEach(ctx, "each", []client.Message{
		{Body: []byte("a")}, {Body: []byte("b"), DelaySeconds: new(-1)}, {Body: []byte("c"), MessageID: "k"}}))
	if len(entries) != 3 || entries[0].Result == nil || entries[2].Result == nil || entries[2].Result.MessageID != "k" ||
		entries[1].Result != nil || entries[1].Err == nil {
		t.Fatalf("entries: %+v", entries)
	}
	if e := entries[1].Err; e.Code != client.CodeInvalidRequest || len(e.Issues) != 1 || e.Issues[0].Path != "delaySeconds" {
		t.Fatalf("entry 1: %v", e)
	}
	if got := receive(t, c, "each", 10); len(got) != 2 || string(got[0].Body) != "a" || string(got[1].Body) != "c" {
		t.Fatalf("received %d messages: %+v", len(got), got)
	}
	if _, err := c.SendEach(ctx, "bad*name", []client.Message{{Body: []byte("x")}}); err == nil {
		t.Fatal("a bad queue name failed no request")
	}
}

func TestSettle(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	c := newClient(t, startNode(t))

	must[client.SendResult](t)(c.Send(ctx, "s", text("one")))
	m := receive(t, c, "s", 1)[0]
	until, err := m.ExtendVisibility(ctx, 90*time.Second)
	if err != nil || !until.After(m.VisibleUntil.Time) {
		t.Fatalf("ExtendVisibility: %v, %v (was %v)", until, err, m.VisibleUntil)
	}
	if err := m.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Ack(ctx); !errors.Is(err, client.ErrSettled) {
		t.Fatalf("second Ack through the same value: %v", err)
	}
	if _, err := m.ExtendVisibility(ctx, time.Minute); !errors.Is(err, client.ErrSettled) {
		t.Fatalf("ExtendVisibility after Ack: %v", err)
	}
	err = c.Ack(ctx, m.ReceiptHandle)
	if !client.IsReceiptStale(err) || client.IsNotFound(err) {
		t.Fatalf("Ack of a used handle: %v", err)
	}
	wantCode(t, err, http.StatusNotFound, client.CodeReceiptStale)

	// Nack: delivered again with a new handle; the old one is stale.
	must[client.SendResult](t)(c.Send(ctx, "s", text("two")))
	m = receive(t, c, "s", 1)[0]
	if err := m.Nack(ctx); err != nil {
		t.Fatal(err)
	}
	m2 := receive(t, c, "s", 1)[0]
	if m2.MessageID != m.MessageID || m2.ReceiveCount != 2 || m2.ReceiptHandle == m.ReceiptHandle {
		t.Fatalf("after nack: %+v", m2)
	}
	if err := c.Nack(ctx, m.ReceiptHandle); !client.IsReceiptStale(err) {
		t.Fatalf("Nack of an old handle: %v", err)
	}
	// A stale answer is remembered by the value that got it.
	stale := m2
	if err := c.Ack(ctx, m2.ReceiptHandle); err != nil {
		t.Fatal(err)
	}
	if err := stale.Nack(ctx); !client.IsReceiptStale(err) {
		t.Fatalf("Nack after the handle was used elsewhere: %v", err)
	}
	if _, err := stale.ExtendVisibility(ctx, time.Minute); !client.IsReceiptStale(err) {
		t.Fatalf("ExtendVisibility after a stale answer: %v", err)
	}

	// Visibility 0 releases at once.
	must[client.SendResult](t)(c.Send(ctx, "s", text("three")))
	m = receive(t, c, "s", 1)[0]
	if _, err := m.ExtendVisibility(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Ack(ctx); !errors.Is(err, client.ErrSettled) {
		t.Fatalf("Ack after a release: %v", err)
	}
	m2 = receive(t, c, "s", 1)[0]
	if m2.MessageID != m.MessageID || m2.ReceiveCount != 2 {
		t.Fatalf("after release: %+v", m2)
	}

	// Requeue.
	if err := m2.Requeue(ctx, "s.other"); err != nil {
		t.Fatal(err)
	}
	m3 := receive(t, c, "s.other", 1)[0]
	if m3.ReRoutedFrom != "s" || m3.ReceiveCount != 1 || string(m3.Body) != "three" {
		t.Fatalf("requeued: %+v", m3)
	}
	if err := c.Requeue(ctx, m3.ReceiptHandle, "s"); err != nil {
		t.Fatal(err)
	}
	m4 := receive(t, c, "s", 1)[0]
	if vu, err := c.ExtendVisibility(ctx, m4.ReceiptHandle, 1500*time.Millisecond); err != nil || vu.IsZero() {
		t.Fatalf("Client.ExtendVisibility: %v %v", vu, err)
	}

	// List forms, with a forged handle, across more than MaxHandles.
	msgs := make([]client.Message, client.MaxBatch)
	for i := range msgs {
		msgs[i] = text(fmt.Sprint(i))
	}
	must[[]client.SendResult](t)(c.SendBatch(ctx, "bulk", msgs))
	must[[]client.SendResult](t)(c.SendBatch(ctx, "bulk", msgs[:100]))
	var handles []string
	for len(handles) < 1100 {
		got, err := c.Receive(ctx, "bulk", client.ReceiveOptions{MaxMessages: 1024, WaitSeconds: new(0)})
		if err != nil || len(got) == 0 {
			t.Fatalf("bulk receive: %d, %v", len(got), err)
		}
		for _, m := range got {
			handles = append(handles, m.ReceiptHandle)
		}
	}
	r, err := c.ExtendVisibilityAll(ctx, handles, 2*time.Minute)
	if err != nil || r.Succeeded != 1100 || len(r.Failed) != 0 {
		t.Fatalf("ExtendVisibilityAll: %d ok, %d failed, %v", r.Succeeded, len(r.Failed), err)
	}
	r, err = c.AckAll(ctx, append(handles[:1097:1097], "forged"))
	if err != nil || r.Succeeded != 1097 || len(r.Failed) != 1 || r.Failed[0].ReceiptHandle != "forged" || r.Failed[0].Code != client.CodeReceiptStale {
		t.Fatalf("AckAll: %d ok, failed %+v, %v", r.Succeeded, r.Failed, err)
	}
	r, err = c.RequeueAll(ctx, handles[1097:1099], "bulk.requeued")
	if err != nil || r.Succeeded != 2 {
		t.Fatalf("RequeueAll: %+v %v", r, err)
	}
	r, err = c.NackAll(ctx, handles[1098:])
	if err != nil || r.Succeeded != 1 || len(r.Failed) != 1 || r.Failed[0].ReceiptHandle != handles[1098] {
		t.Fatalf("NackAll: %+v %v", r, err)
	}
	if r, err := c.AckAll(ctx, nil); err != nil || r.Succeeded != 0 {
		t.Fatalf("AckAll of nothing: %+v %v", r, err)
	}
	if n := total(t, c, "bulk.requeued"); n != 2 {
		t.Fatalf("bulk.requeued holds %d, want 2", n)
	}
}

// ---------------------------------------------------------------------------
// Browse, DLQ, redrive

func TestOperate(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	c := newClient(t, startNode(t))

	msgs := make([]client.Message, 150)
	for i := range msgs {
		msgs[i] = client.Message{Body: []byte(fmt.Sprint(i)), MessageID: fmt.Sprintf("m-%03d", i)}
	}
	must[[]client.SendResult](t)(c.SendBatch(ctx, "b", msgs))
	must[client.SendResult](t)(c.Send(ctx, "b", client.Message{Body: []byte("later"), MessageID: "delayed", DelaySeconds: new(600)}))
	inFlight := receive(t, c, "b", 5)

	count := func(state client.State) (n int, ids []string) {
		var last int64
		for m, err := range c.Messages(ctx, "b", state) {
			if err != nil {
				t.Fatal(err)
			}
			if m.Sequence <= last {
				t.Fatalf("browse out of sequence order")
			}
			last = m.Sequence
			if state != "" && m.State != state {
				t.Fatalf("state %q in a %q browse", m.State, state)
			}
			if m.VisibleAt.IsZero() {
				t.Fatalf("no visibleAt: %+v", m)
			}
			n++
			ids = append(ids, m.MessageID)
		}
		return n, ids
	}
	if n, _ := count(""); n != 151 {
		t.Fatalf("browse all: %d, want 151", n)
	}
	if n, ids := count(client.StateInFlight); n != 5 || ids[0] != inFlight[0].MessageID {
		t.Fatalf("browse in_flight: %d %v", n, ids)
	}
	if n, ids := count(client.StateDelayed); n != 1 || ids[0] != "delayed" {
		t.Fatalf("browse delayed: %d %v", n, ids)
	}
	if n, _ := count(client.StateAvailable); n != 145 {
		t.Fatalf("browse available: %d", n)
	}
	page, next, err := c.BrowseMessages(ctx, "b", client.BrowseOptions{Limit: 10})
	if err != nil || len(page) != 10 || next == "" || page[0].MessageID != "m-000" || string(page[1].Body) != "1" {
		t.Fatalf("browse page: %d, %q, %v", len(page), next, err)
	}
	// Search across queues finds the same messages, newest first.
	var found []string
	for m, err := range c.Search(ctx, client.SearchOptions{Queues: []string{"b"}, States: []client.State{client.StateDelayed, client.StateInFlight}, Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		if m.Queue != "b" || (m.State != client.StateDelayed && m.State != client.StateInFlight) {
			t.Fatalf("search found %s in %q as %q", m.MessageID, m.Queue, m.State)
		}
		found = append(found, m.MessageID)
	}
	if len(found) != 6 || found[0] != "delayed" {
		t.Fatalf("search for delayed and in-flight messages found %v, want 6 with the newest (delayed) first", found)
	}
	if _, _, err := c.BrowseMessages(ctx, "b", client.BrowseOptions{State: "bogus"}); err == nil {
		t.Fatal("browse with a bad state: no error")
	} else if e := wantCode(t, err, http.StatusBadRequest, client.CodeInvalidRequest); !hasIssue(e, "state") {
		t.Fatalf("issues: %+v", e.Issues)
	}

	m := must[client.BrowsedMessage](t)(c.GetMessage(ctx, "b", inFlight[0].MessageID))
	if m.State != client.StateInFlight || m.ReceiveCount != 1 {
		t.Fatalf("GetMessage: %+v", m)
	}
	if err := c.DeleteMessage(ctx, "b", inFlight[0].MessageID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetMessage(ctx, "b", inFlight[0].MessageID); !client.IsNotFound(err) {
		t.Fatalf("GetMessage after delete: %v", err)
	}
	if err := c.DeleteMessage(ctx, "b", inFlight[0].MessageID); !client.IsNotFound(err) {
		t.Fatalf("second DeleteMessage: %v", err)
	}
	if err := inFlight[0].Ack(ctx); !client.IsReceiptStale(err) {
		t.Fatalf("Ack of a deleted message: %v", err)
	}

	// Dead-lettering: one delivery allowed, then to src.dlq.
	if _, _, err := c.PutQueue(ctx, "src", client.QueueSettings{MaxReceiveCount: new(1), DeadLetterQueue: new("src.dlq")}); err != nil {
		t.Fatal(err)
	}
	must[[]client.SendResult](t)(c.SendBatch(ctx, "src", []client.Message{
		{Body: []byte("d1"), MessageID: "d1"}, {Body: []byte("d2"), MessageID: "d2"}, {Body: []byte("d3"), MessageID: "d3"}}))
	var handles []string
	for _, m := range receive(t, c, "src", 3) {
		handles = append(handles, m.ReceiptHandle)
	}
	if r, err := c.NackAll(ctx, handles); err != nil || r.Succeeded != 3 {
		t.Fatalf("NackAll on the last delivery: %+v %v", r, err)
	}
	var dead []string
	for m, err := range c.DeadLettered(ctx, "src") {
		if err != nil {
			t.Fatal(err)
		}
		if m.Queue != "src.dlq" || m.ReRoutedFrom != "src" || m.DeadLetteredAt == nil || m.ReceiveCount != 0 {
			t.Fatalf("dead-lettered: %+v", m)
		}
		dead = append(dead, m.MessageID)
	}
	slices.Sort(dead)
	if !slices.Equal(dead, []string{"d1", "d2", "d3"}) {
		t.Fatalf("dead-lettered %v", dead)
	}
	if page, _, err := c.ListDeadLettered(ctx, client.DeadLetteredOptions{Limit: 2}); err != nil || len(page) != 2 {
		t.Fatalf("ListDeadLettered: %d %v", len(page), err)
	}

	r := must[client.Redriven](t)(c.Redrive(ctx, "src.dlq", "d1", ""))
	if r.Queue != "src" || r.MessageID == "" || r.MessageID == "d1" || r.Sequence == 0 {
		t.Fatalf("redriven as %+v", r)
	}
	back := must[client.BrowsedMessage](t)(c.GetMessage(ctx, "src", r.MessageID))
	if string(back.Body) != "d1" || back.ReRoutedFrom != "src.dlq" || back.DeadLetteredAt != nil {
		t.Fatalf("redriven message: %+v", back)
	}
	if _, err := c.Redrive(ctx, "src.dlq", "d1", ""); !client.IsNotFound(err) {
		t.Fatalf("second redrive: %v", err)
	}
	must[client.SendResult](t)(c.Send(ctx, "src.dlq", client.Message{Body: []byte("p"), MessageID: "plain"}))
	_, err = c.Redrive(ctx, "src.dlq", "plain", "")
	if !client.IsConflict(err) {
		t.Fatalf("redrive of a message that was not dead-lettered: %v", err)
	}
	wantCode(t, err, http.StatusConflict, client.CodeNotDeadLettered)

	moved, remaining, err := c.RedriveQueue(ctx, "src.dlq", "elsewhere", 1)
	if err != nil || moved != 1 || remaining != 1 {
		t.Fatalf("RedriveQueue max 1: moved %d remaining %d %v", moved, remaining, err)
	}
	moved, remaining, err = c.RedriveQueue(ctx, "src.dlq", "", 0)
	if err != nil || moved != 1 || remaining != 0 {
		t.Fatalf("RedriveQueue: moved %d remaining %d %v", moved, remaining, err)
	}
	if total(t, c, "elsewhere") != 1 || total(t, c, "src") != 2 {
		t.Fatalf("after redrives: elsewhere %d, src %d", total(t, c, "elsewhere"), total(t, c, "src"))
	}
}

// History: a traced queue's message lists its events, oldest first, with
// each type's fields, and stays listed after the ack; an untraced queue's
// message has none; a message that never existed is not_found.
func TestHistory(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	c := newClient(t, startNode(t))

	q, created, err := c.PutQueue(ctx, "traced", client.QueueSettings{Trace: new(true)})
	if err != nil || !created || !q.Trace {
		t.Fatalf("PutQueue trace: %+v %v %v", q, created, err)
	}
	if q := must[client.Queue](t)(c.GetQueue(ctx, "traced")); !q.Trace {
		t.Fatalf("GetQueue: trace off: %+v", q)
	}
	must[client.SendResult](t)(c.Send(ctx, "traced", client.Message{Body: []byte("x"), MessageID: "t-1"}))
	r := receive(t, c, "traced", 1)[0]
	if err := r.NackWithReason(ctx, "flaky"); err != nil {
		t.Fatal(err)
	}
	r = receive(t, c, "traced", 1)[0]
	until := must[time.Time](t)(r.ExtendVisibility(ctx, time.Minute))
	if err := r.Ack(ctx); err != nil {
		t.Fatal(err)
	}

	events := must[[]client.HistoryEvent](t)(c.History(ctx, "traced", "t-1"))
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
		if e.Queue != "traced" || e.MessageID != "t-1" || e.At.IsZero() || e.KeyID != nil {
			t.Errorf("event %+v: want queue traced, message t-1, a time, no key (auth off)", e)
		}
	}
	want := []string{client.EventSent, client.EventReceived, client.EventNacked, client.EventReceived,
		client.EventExtended, client.EventAcked}
	if !slices.Equal(types, want) {
		t.Fatalf("history %v, want %v", types, want)
	}
	if rc := events[3].ReceiveCount; rc == nil || *rc != 2 || events[3].VisibleUntil == nil {
		t.Errorf("second receive: %+v", events[3])
	}
	if reason := events[2].Reason; reason == nil || *reason != "flaky" {
		t.Errorf("nack: %+v", events[2])
	}
	if vu := events[4].VisibleUntil; vu == nil || !vu.Equal(until) {
		t.Errorf("extend: %+v, want visibleUntil %s", events[4], until)
	}
	for i := 1; i < len(events); i++ {
		if events[i].At.Before(events[i-1].At.Time) {
			t.Fatalf("events out of order: %+v", events)
		}
	}

	must[client.SendResult](t)(c.Send(ctx, "plain", client.Message{Body: []byte("y"), MessageID: "p-1"}))
	if events, err := c.History(ctx, "plain", "p-1"); err != nil || events == nil || len(events) != 0 {
		t.Fatalf("history of an untraced message: %v %v, want none", events, err)
	}
	if _, err := c.History(ctx, "traced", "never"); !client.IsNotFound(err) {
		t.Fatalf("history of a message that never existed: %v", err)
	}
}

// ---------------------------------------------------------------------------
// Typed errors

func TestErrors(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	c := newClient(t, startNode(t))

	_, err := c.GetQueue(ctx, "missing")
	e := wantCode(t, err, http.StatusNotFound, client.CodeNotFound)
	if !client.IsNotFound(err) || client.IsReceiptStale(err) || client.IsConflict(err) {
		t.Fatalf("helpers disagree on %v", err)
	}
	if !strings.HasPrefix(e.RequestID, "go-") || !strings.Contains(err.Error(), "not_found") || !strings.Contains(err.Error(), e.RequestID) {
		t.Fatalf("error %q, request id %q", err, e.RequestID)
	}

	_, err = c.Send(ctx, "q", client.Message{Body: []byte("x"), DelaySeconds: new(-1)})
	e = wantCode(t, err, http.StatusBadRequest, client.CodeInvalidRequest)
	if !hasIssue(e, "delaySeconds") || !strings.Contains(err.Error(), "delaySeconds") {
		t.Fatalf("issues %+v in %q", e.Issues, err)
	}
	_, err = c.SendBatch(ctx, "q", []client.Message{text("ok"), {}})
	if e := wantCode(t, err, http.StatusBadRequest, client.CodeInvalidRequest); !hasIssue(e, "messages[1].body") {
		t.Fatalf("issues %+v", e.Issues)
	}
	_, err = c.Send(ctx, "bad name", text("x"))
	if e := wantCode(t, err, http.StatusBadRequest, client.CodeInvalidRequest); !hasIssue(e, "queue") {
		t.Fatalf("issues %+v", e.Issues)
	}
	_, err = c.Receive(ctx, "q", client.ReceiveOptions{MaxMessages: 5000})
	if e := wantCode(t, err, http.StatusBadRequest, client.CodeInvalidRequest); !hasIssue(e, "maxMessages") {
		t.Fatalf("issues %+v", e.Issues)
	}
	if _, err := c.SendBatch(ctx, "q", make([]client.Message, client.MaxBatch+1)); err == nil {
		t.Fatal("oversized batch: no error")
	}
	if err := c.Ack(ctx, "forged"); !client.IsReceiptStale(err) {
		t.Fatalf("forged handle: %v", err)
	}
	_, _, err = c.PutQueue(ctx, "q", client.QueueSettings{VisibilitySeconds: new(-1)})
	if e := wantCode(t, err, http.StatusBadRequest, client.CodeInvalidRequest); !hasIssue(e, "visibilitySeconds") {
		t.Fatalf("issues %+v", e.Issues)
	}

	// A consumer of a queue no request can reach stops with the error.
	err = c.Consume(ctx, "bad name", func(context.Context, *client.Received) error { return nil }, client.ConsumeOptions{})
	wantCode(t, err, http.StatusBadRequest, client.CodeInvalidRequest)

	// An answer that is not skipq's envelope still becomes an *Error.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "lb-1")
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	defer plain.Close()
	_, err = newClient(t, plain.URL).GetQueue(ctx, "q")
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusBadGateway || ce.Code != "" || ce.RequestID != "lb-1" || !strings.Contains(ce.Message, "bad gateway") {
		t.Fatalf("non-envelope error: %#v", err)
	}
}

// ---------------------------------------------------------------------------
// Retries

func TestRetryOn503And429(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	nodeURL := startNode(t)
	direct := newClient(t, nodeURL)
	p := newProxy(t, nodeURL)
	c := newClient(t, p.URL, client.WithRetry(4, time.Millisecond, 50*time.Millisecond))

	if _, _, err := direct.PutQueue(ctx, "r", client.QueueSettings{}); err != nil {
		t.Fatal(err)
	}
	// Idempotent GET: retried through two 503s.
	p.failFirst("GET /v1/queues/r", 2, answer503)
	if _, err := c.GetQueue(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if n := p.count("GET /v1/queues/r"); n != 3 {
		t.Fatalf("GET attempts %d, want 3", n)
	}

	// A send without a messageId is not retried on 503: it is unknown
	// whether the first attempt enqueued it.
	p.failFirst("/messages", 1, answer503)
	_, err := c.Send(ctx, "r", text("unkeyed"))
	if e := wantCode(t, err, http.StatusServiceUnavailable, client.CodeUnavailable); e.RetryAfter != 0 {
		t.Fatalf("RetryAfter %v, want 0", e.RetryAfter)
	}
	if n := p.count("POST /v1/queues/r/messages"); n != 1 {
		t.Fatalf("unkeyed send attempts %d, want 1", n)
	}
	// … but on 429, which the server answers before doing anything.
	p.failFirst("/messages", 2, answer429)
	if _, err := c.Send(ctx, "r", text("unkeyed after 429")); err != nil {
		t.Fatal(err)
	}
	if n := p.count("POST /v1/queues/r/messages"); n != 4 {
		t.Fatalf("send attempts %d, want 4", n)
	}
	// A keyed send is retried on 503, and creates one message.
	p.failFirst("/messages", 3, answer503)
	res, err := c.Send(ctx, "r", client.Message{Body: []byte("keyed"), MessageID: "key-1"})
	if err != nil || res.Duplicate {
		t.Fatalf("keyed send: %+v %v", res, err)
	}
	if n := p.count("POST /v1/queues/r/messages"); n != 8 {
		t.Fatalf("send attempts %d, want 8", n)
	}
	// A batch with every id too; one without is not retried.
	p.failFirst("/messages/batch", 1, answer503)
	if _, err := c.SendBatch(ctx, "r", []client.Message{{Body: []byte("b"), MessageID: "key-2"}}); err != nil {
		t.Fatal(err)
	}
	p.failFirst("/messages/batch", 3, answer503)
	if _, err := c.SendBatch(ctx, "r", []client.Message{{Body: []byte("b"), MessageID: "key-3"}, text("no id")}); err == nil {
		t.Fatal("batch with an unkeyed message was retried through a 503")
	}
	if n := p.count("POST /v1/queues/r/messages/batch"); n != 3 {
		t.Fatalf("batch attempts %d, want 3", n)
	}
	if n := total(t, direct, "r"); n != 3 {
		t.Fatalf("queue holds %d messages, want 3 (one per successful send)", n)
	}

	// Receive is retried on 503 (the server claimed nothing).
	p.failFirst("/messages/receive", 1, answer503)
	msgs, err := c.Receive(ctx, "r", client.ReceiveOptions{MaxMessages: 10, WaitSeconds: new(0)})
	if err != nil || len(msgs) != 3 {
		t.Fatalf("receive: %d %v", len(msgs), err)
	}
	// Settles are retried.
	p.failFirst("/receipts/ack", 2, answer503)
	if err := msgs[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if n := p.count("POST /v1/receipts/ack"); n != 3 {
		t.Fatalf("ack attempts %d, want 3", n)
	}
	// DeleteQueue and PurgeQueue: 429 yes, 503 no.
	p.failFirst("/purge", 1, answer503)
	if _, err := c.PurgeQueue(ctx, "r"); err == nil {
		t.Fatal("purge retried through a 503")
	}
	p.failFirst("/purge", 2, answer429)
	if _, err := c.PurgeQueue(ctx, "r"); err != nil {
		t.Fatal(err)
	}

	// Retries end: the last answer is returned, with its Retry-After. A
	// Retry-After longer than the maximum delay waits only that maximum.
	p.failFirst("GET /v1/queues/r", 100, answer503Later)
	c2 := newClient(t, p.URL, client.WithRetry(2, time.Millisecond, time.Millisecond))
	before := p.count("GET /v1/queues/r")
	_, err = c2.GetQueue(ctx, "r")
	if e := wantCode(t, err, http.StatusServiceUnavailable, client.CodeUnavailable); e.RetryAfter != time.Second {
		t.Fatalf("RetryAfter %v, want 1s", e.RetryAfter)
	}
	if n := p.count("GET /v1/queues/r") - before; n != 2 {
		t.Fatalf("attempts %d, want 2", n)
	}
	// One attempt: no retries.
	c1 := newClient(t, p.URL, client.WithRetry(1, 0, 0))
	before = p.count("GET /v1/queues/r")
	if _, err := c1.GetQueue(ctx, "r"); err == nil {
		t.Fatal("no error")
	}
	if n := p.count("GET /v1/queues/r") - before; n != 1 {
		t.Fatalf("attempts %d, want 1", n)
	}
	// A context that ends during the backoff ends the call.
	p.failFirst("GET /v1/queues/r", 100, answer503Later)
	slow := newClient(t, p.URL, client.WithRetry(4, time.Hour, time.Hour))
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = slow.GetQueue(short, "r")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled backoff: %v", err)
	}
	wantCode(t, err, http.StatusServiceUnavailable, client.CodeUnavailable) // the last answer is kept
}

func TestRetryOnConnectionErrors(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	nodeURL := startNode(t)
	direct := newClient(t, nodeURL)
	p := newProxy(t, nodeURL)
	c := newClient(t, p.URL, client.WithHTTPClient(fresh()), client.WithRetry(4, time.Millisecond, 10*time.Millisecond))

	// A send without a messageId is not retried after a connection error.
	p.failFirst("POST /v1/queues/c/messages", 1, dropConn)
	_, err := c.Send(ctx, "c", text("unkeyed"))
	var ue *url.Error
	if err == nil || !errors.As(err, &ue) {
		t.Fatalf("unkeyed send through a dropped connection: %v", err)
	}
	if n := p.count("POST /v1/queues/c/messages"); n != 1 {
		t.Fatalf("unkeyed send attempts %d, want 1", n)
	}
	if _, err := direct.GetQueue(ctx, "c"); !client.IsNotFound(err) {
		t.Fatalf("the dropped send reached the node: %v", err)
	}

	// A keyed send is; the answer lost after the node stored the message
	// is answered by the retry as a duplicate of the first result.
	p.failFirst("POST /v1/queues/c/messages", 3, forwardThenDrop)
	res, err := c.Send(ctx, "c", client.Message{Body: []byte("keyed"), MessageID: "ck"})
	if err != nil || !res.Duplicate || res.MessageID != "ck" {
		t.Fatalf("keyed send: %+v %v", res, err)
	}
	if n := p.count("POST /v1/queues/c/messages"); n != 5 {
		t.Fatalf("send attempts %d, want 5", n)
	}
	if n := total(t, direct, "c"); n != 1 {
		t.Fatalf("queue holds %d, want 1", n)
	}

	// GETs are retried.
	p.failFirst("GET /v1/queues/c", 1, dropConn)
	if _, err := c.GetQueue(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if n := p.count("GET /v1/queues/c"); n != 2 {
		t.Fatalf("GET attempts %d, want 2", n)
	}

	// A receive is not: its lost answer may have claimed messages.
	p.failFirst("/messages/receive", 1, forwardThenDrop)
	if _, err := c.Receive(ctx, "c", client.ReceiveOptions{WaitSeconds: new(0), VisibilitySeconds: new(1)}); err == nil {
		t.Fatal("receive through a dropped answer: no error")
	}
	if n := p.count("POST /v1/queues/c/messages/receive"); n != 1 {
		t.Fatalf("receive attempts %d, want 1", n)
	}
	// The claimed message comes back when its one-second lease ends.
	var m *client.Received
	eventually(t, "the lost receive's message to come back", func() bool {
		msgs, err := c.Receive(ctx, "c", client.ReceiveOptions{WaitSeconds: new(1)})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 1 {
			m = msgs[0]
		}
		return m != nil
	})
	if m.ReceiveCount != 2 {
		t.Fatalf("receiveCount %d, want 2", m.ReceiveCount)
	}

	// An ack whose answer is lost is retried; the retry finds the handle
	// used and answers receipt_stale although the message was acked — the
	// documented ambiguity.
	p.failFirst("POST /v1/receipts/ack", 1, forwardThenDrop)
	err = m.Ack(ctx)
	if !client.IsReceiptStale(err) {
		t.Fatalf("retried ack after a lost answer: %v", err)
	}
	if n := total(t, direct, "c"); n != 0 {
		t.Fatalf("the ack did not take: %d messages", n)
	}
}

// ---------------------------------------------------------------------------
// Consume

// consumerLog is a logger for a consumer that the test can read.
func consumerLog() (*slog.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

func TestConsumeHeartbeatKeepsSlowMessageHidden(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	nodeURL := startNode(t)
	direct := newClient(t, nodeURL)
	p := newProxy(t, nodeURL)
	c := newClient(t, p.URL)
	log, logs := consumerLog()

	sent := must[client.SendResult](t)(direct.Send(ctx, "slow", text("take your time")))
	var calls atomic.Int32
	started, release := make(chan *client.Received, 1), make(chan struct{})
	handler := func(hctx context.Context, m *client.Received) error {
		calls.Add(1)
		started <- m
		select { // the work: until the test has seen it outlast its lease
		case <-release:
		case <-hctx.Done():
			return hctx.Err()
		}
		return nil
	}
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- c.Consume(cctx, "slow", handler, client.ConsumeOptions{VisibilitySeconds: 2, WaitSeconds: 1, Logger: log})
	}()
	m := <-started
	if m.MessageID != sent.MessageID || m.ReceiveCount != 1 || m.VisibleUntil == nil {
		t.Fatalf("handler got %+v", m)
	}
	// While the handler runs, nobody else gets the message: the handler is
	// released once two receives have started after the lease it was
	// delivered with, and one more lease, would have ended unextended.
	unextended := m.VisibleUntil.Add(2 * time.Second)
	late := 0
	for late < 2 {
		start := time.Now()
		msgs, err := direct.Receive(ctx, "slow", client.ReceiveOptions{WaitSeconds: new(1)})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) > 0 {
			t.Fatalf("received %s (delivery %d) while its handler ran", msgs[0].MessageID, msgs[0].ReceiveCount)
		}
		if start.After(unextended) {
			late++
		}
	}
	close(release)
	eventually(t, "the ack", func() bool { return total(t, direct, "slow") == 0 })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if calls.Load() != 1 {
		t.Fatalf("handler calls %d", calls.Load())
	}
	if acks := p.settles("ack"); len(acks) != 1 || acks[m.ReceiptHandle] != 1 {
		t.Fatalf("acks %v", acks)
	}
	if ext := p.settles("visibility")[m.ReceiptHandle]; ext < 2 {
		t.Fatalf("%d lease extensions, want at least 2", ext)
	}
	if p.count("POST /v1/receipts/nack") != 0 || p.answers("ack", 404)+p.answers("visibility", 404) != 0 {
		t.Fatalf("unexpected settles; log:\n%s", logs)
	}
}

func TestConsumeNacksOnErrorAndPanic(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	nodeURL := startNode(t)
	direct := newClient(t, nodeURL)
	p := newProxy(t, nodeURL)
	c := newClient(t, p.URL)
	log, logs := consumerLog()

	must[[]client.SendResult](t)(direct.SendBatch(ctx, "flaky", []client.Message{
		{Body: []byte("fail"), MessageID: "fail"}, {Body: []byte("panic"), MessageID: "panic"}, {Body: []byte("fine"), MessageID: "fine"},
		{Body: []byte("self"), MessageID: "self"}}))

	var mu sync.Mutex
	counts := map[string][]int{}   // messageId → receiveCount of each call
	reasons := map[string]string{} // messageId → the reason its last nack gave
	var running, peak atomic.Int32
	handler := func(hctx context.Context, m *client.Received) error {
		n := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		mu.Lock()
		counts[m.MessageID] = append(counts[m.MessageID], m.ReceiveCount)
		first := len(counts[m.MessageID]) == 1
		if f := m.LastFailure; f != nil && f.Reason != nil {
			reasons[m.MessageID] = *f.Reason
		}
		mu.Unlock()
		switch {
		case m.MessageID == "fail" && first:
			return errors.New("not yet")
		case m.MessageID == "panic" && first:
			panic("boom")
		case m.MessageID == "self":
			return m.Requeue(hctx, "flaky.moved") // settled by the handler: Consume leaves it alone
		}
		return nil
	}
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- c.Consume(cctx, "flaky", handler, client.ConsumeOptions{Concurrency: 2, WaitSeconds: 1, Logger: log})
	}()
	eventually(t, "every message to be handled", func() bool { return total(t, direct, "flaky") == 0 })
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, want := range map[string][]int{"fail": {1, 2}, "panic": {1, 2}, "fine": {1}, "self": {1}} {
		if !slices.Equal(counts[id], want) {
			t.Errorf("%s: deliveries %v, want %v", id, counts[id], want)
		}
	}
	if peak.Load() > 2 {
		t.Errorf("%d handlers ran at once, concurrency 2", peak.Load())
	}
	// The handler's error is the nack's reason.
	if reasons["fail"] != "not yet" || !strings.Contains(reasons["panic"], "boom") {
		t.Errorf("reasons seen on redelivery: %q", reasons)
	}
	if n := p.count("POST /v1/receipts/nack"); n != 2 {
		t.Errorf("%d nacks, want 2", n)
	}
	if n := len(p.settles("ack")); n != 3 { // on the ack route, or carried by a receive
		t.Errorf("%d acks, want 3", n)
	}
	for h, n := range p.settles("ack", "nack", "requeue") {
		if n != 1 {
			t.Errorf("handle %.12s… settled %d times", h, n)
		}
	}
	if n := total(t, direct, "flaky.moved"); n != 1 {
		t.Errorf("flaky.moved holds %d, want 1", n)
	}
	if s := logs.String(); !strings.Contains(s, "handler panicked") || !strings.Contains(s, "goroutine") || !strings.Contains(s, "not yet") {
		t.Errorf("the log lacks the panic with its stack or the handler error:\n%s", s)
	}
}

func TestConsumeCleanStopLosesNothing(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	nodeURL := startNode(t)
	direct := newClient(t, nodeURL)
	p := newProxy(t, nodeURL)
	c := newClient(t, p.URL)
	log, logs := consumerLog()

	const n, concurrency = 30, 4
	batch := make([]client.Message, n)
	for i := range batch {
		batch[i] = client.Message{Body: []byte(fmt.Sprint(i)), MessageID: fmt.Sprintf("c-%02d", i)}
	}
	must[[]client.SendResult](t)(direct.SendBatch(ctx, "work", batch))

	var mu sync.Mutex
	calls := map[string]int{}
	var running, peak atomic.Int32
	gate := make(chan struct{})
	started := make(chan struct{}, n)
	handler := func(hctx context.Context, m *client.Received) error {
		n := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		mu.Lock()
		calls[m.MessageID]++
		mu.Unlock()
		started <- struct{}{}
		<-gate
		if hctx.Err() != nil {
			t.Errorf("handler context cancelled by the consumer's shutdown: %v", hctx.Err())
		}
		return nil
	}
	opts := client.ConsumeOptions{Concurrency: concurrency, VisibilitySeconds: 5, Logger: log}

	// First consumer: stop it while all its handlers are busy.
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Consume(cctx, "work", handler, opts) }()
	for range concurrency {
		<-started
	}
	stop()
	select {
	case err := <-done:
		t.Fatalf("Consume returned with handlers still running: %v", err)
	default:
	}
	close(gate) // the handlers finish after the stop and are acked
	if err := <-done; err != nil {
		t.Fatalf("first Consume: %v", err)
	}
	mu.Lock()
	handled := len(calls)
	mu.Unlock()
	if handled != concurrency {
		t.Fatalf("first consumer handled %d messages, want %d", handled, concurrency)
	}
	if q := must[client.Queue](t)(direct.GetQueue(ctx, "work")); q.Stats.Total != n-concurrency || q.Stats.InFlight != 0 {
		t.Fatalf("after the first consumer: %+v", q.Stats)
	}

	// Second consumer: everything else.
	cctx, stop = context.WithCancel(ctx)
	go func() { done <- c.Consume(cctx, "work", handler, opts) }()
	eventually(t, "the rest to be handled", func() bool { return total(t, direct, "work") == 0 })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("second Consume: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(calls) != n {
		t.Fatalf("%d messages handled, want %d", len(calls), n)
	}
	for id, k := range calls {
		if k != 1 {
			t.Errorf("%s handled %d times", id, k)
		}
	}
	acks := p.settles("ack")
	if len(acks) != n {
		t.Errorf("%d handles acked, want %d", len(acks), n)
	}
	for h, k := range p.settles("ack", "nack", "requeue") {
		if k != 1 {
			t.Errorf("handle %.12s… settled %d times", h, k)
		}
	}
	if p.count("POST /v1/receipts/nack") != 0 || p.answers("ack", 404) != 0 {
		t.Errorf("nacks or stale acks; log:\n%s", logs)
	}
	if peak.Load() > concurrency {
		t.Errorf("%d handlers ran at once, concurrency %d", peak.Load(), concurrency)
	}
}

func TestConsumeShutdownTimeoutCancelsAndNacks(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	nodeURL := startNode(t)
	direct := newClient(t, nodeURL)
	p := newProxy(t, nodeURL)
	c := newClient(t, p.URL)
	log, _ := consumerLog()

	must[[]client.SendResult](t)(direct.SendBatch(ctx, "stuck", []client.Message{text("a"), text("b")}))
	started := make(chan struct{}, 2)
	handler := func(hctx context.Context, m *client.Received) error {
		started <- struct{}{}
		<-hctx.Done() // never finishes on its own
		return hctx.Err()
	}
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- c.Consume(cctx, "stuck", handler, client.ConsumeOptions{Concurrency: 2, VisibilitySeconds: 60,
			ShutdownTimeout: 200 * time.Millisecond, Logger: log})
	}()
	<-started
	<-started
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := p.count("POST /v1/receipts/nack"); n != 2 {
		t.Fatalf("%d nacks, want 2", n)
	}
	// Nacked, not left to their 60 s lease: available at once.
	msgs := receive(t, direct, "stuck", 10)
	if len(msgs) != 2 || msgs[0].ReceiveCount != 2 || msgs[1].ReceiveCount != 2 {
		t.Fatalf("after the shutdown: %d messages", len(msgs))
	}
}

// On a FIFO queue Consume never handles two messages of one group at once,
// handles each group's messages in send order, and after a failure nacks
// the rest of the group's batch, so the group's order survives it.
func TestConsumeKeepsGroupsInOrder(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	c := newClient(t, startNode(t))
	log, _ := consumerLog()
	const groups, perGroup = 4, 6
	var msgs []client.Message
	for i := range perGroup {
		for g := range groups {
			msgs = append(msgs, client.Message{Body: []byte(fmt.Sprint(i)), GroupID: fmt.Sprint("g", g)})
		}
	}
	must[[]client.SendResult](t)(c.SendBatch(ctx, "ordered", msgs))

	var mu sync.Mutex
	handled := map[string][]string{}
	running := map[string]int{}
	failedOnce := false
	var overlap atomic.Bool
	handler := func(_ context.Context, m *client.Received) error {
		mu.Lock()
		running[m.GroupID]++
		if running[m.GroupID] > 1 {
			overlap.Store(true)
		}
		fail := m.GroupID == "g1" && string(m.Body) == "2" && !failedOnce
		if fail {
			failedOnce = true
		} else {
			handled[m.GroupID] = append(handled[m.GroupID], string(m.Body))
		}
		mu.Unlock()
		defer func() { mu.Lock(); running[m.GroupID]--; mu.Unlock() }()
		if fail {
			return errors.New("not yet")
		}
		return nil
	}
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- c.Consume(cctx, "ordered", handler, client.ConsumeOptions{Concurrency: 6, MaxMessagesPerGroup: 3,
			WaitSeconds: 1, Logger: log})
	}()
	eventually(t, "every message to be handled", func() bool { return total(t, c, "ordered") == 0 })
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if overlap.Load() {
		t.Error("two messages of one group were handled at once")
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"0", "1", "2", "3", "4", "5"}
	for g := range groups {
		if got := handled[fmt.Sprint("g", g)]; !slices.Equal(got, want) {
			t.Errorf("group g%d handled %v, want %v", g, got, want)
		}
	}
}
