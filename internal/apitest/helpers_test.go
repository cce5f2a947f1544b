// Package apitest drives skipq nodes over HTTP against a real PostgreSQL:
// every test gets its own database (testdb) and in-process nodes.
package apitest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/node"
	"github.com/skipq/skipq/internal/node/nodetest"
	"github.com/skipq/skipq/internal/testdb"
)

// testNode is one running node.
type testNode struct {
	URL string
	DB  string
}

// startNode runs a node on a random loopback port until the test ends.
func startNode(t *testing.T, dbURL string, configure ...func(*node.Config)) *testNode {
	t.Helper()
	return &testNode{URL: nodetest.Start(t, dbURL, configure...), DB: dbURL}
}

// newNode is a fresh database with one node on it.
func newNode(t *testing.T, configure ...func(*node.Config)) *testNode {
	return startNode(t, testdb.New(t), configure...)
}

// response is a decoded JSON response.
type response struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    []byte
}

// do sends body (nil = none; a string is sent as is, anything else as
// JSON) and decodes the response.
func (n *testNode) do(t testing.TB, method, path string, body any, headers ...string) response {
	t.Helper()
	var r io.Reader
	var sent []byte // the request body, for validateExchange
	contentType := ""
	switch b := body.(type) {
	case nil:
	case string:
		r, contentType, sent = strings.NewReader(b), "application/json", []byte(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r, contentType, sent = bytes.NewReader(raw), "application/json", raw
	}
	req, err := http.NewRequest(method, n.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	validateExchange(t, req, sent, resp, raw)
	out := response{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	if len(raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &out.Body); err != nil {
			t.Fatalf("%s %s: response is not a JSON object: %q", method, path, raw)
		}
	}
	return out
}

// must is do that fails the test unless the status is want.
func (n *testNode) must(t testing.TB, want int, method, path string, body any) map[string]any {
	t.Helper()
	r := n.do(t, method, path, body)
	if r.Status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.Status, want, r.Raw)
	}
	return r.Body
}

// send sends one text message and returns its result.
func (n *testNode) send(t *testing.T, queue string, msg map[string]any) map[string]any {
	t.Helper()
	return n.must(t, http.StatusCreated, "POST", "/v1/queues/"+queue+"/messages", msg)
}

// receive receives with the given options and returns the messages.
func (n *testNode) receive(t testing.TB, queue string, opts map[string]any) []map[string]any {
	t.Helper()
	if opts == nil {
		opts = map[string]any{}
	}
	if _, ok := opts["waitSeconds"]; !ok {
		opts["waitSeconds"] = 0
	}
	body := n.must(t, http.StatusOK, "POST", "/v1/queues/"+queue+"/messages/receive", opts)
	return objects(t, body["messages"])
}

func objects(t testing.TB, v any) []map[string]any {
	t.Helper()
	list, ok := v.([]any)
	if !ok {
		t.Fatalf("not a list: %#v", v)
	}
	out := make([]map[string]any, len(list))
	for i, x := range list {
		out[i] = x.(map[string]any)
	}
	return out
}

// errorCode checks an error envelope and returns its code and issues.
func errorCode(t *testing.T, r response) (string, []map[string]any) {
	t.Helper()
	e, ok := r.Body["error"].(map[string]any)
	if !ok {
		t.Fatalf("status %d without an error envelope: %s", r.Status, r.Raw)
	}
	if e["requestId"] == "" || e["requestId"] == nil || e["message"] == "" {
		t.Fatalf("incomplete error envelope: %s", r.Raw)
	}
	if r.Header.Get("X-Request-Id") != e["requestId"] {
		t.Fatalf("X-Request-Id %q differs from the envelope's %v", r.Header.Get("X-Request-Id"), e["requestId"])
	}
	var issues []map[string]any
	if raw, ok := e["issues"]; ok {
		issues = objects(t, raw)
	}
	return e["code"].(string), issues
}

// wantError asserts the status, the code and (if given) the issue paths.
func wantError(t *testing.T, r response, status int, code string, paths ...string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Raw)
	}
	got, issues := errorCode(t, r)
	if got != code {
		t.Fatalf("code %q, want %q: %s", got, code, r.Raw)
	}
	for _, p := range paths {
		found := false
		for _, is := range issues {
			if is["path"] == p {
				found = true
			}
		}
		if !found {
			t.Fatalf("no issue at path %q: %s", p, r.Raw)
		}
	}
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

// offTest is a testing.TB for a helper that runs on a goroutine of its own:
// Fatal and FailNow must not be called off the test's goroutine, so they
// report the failure (Errorf is safe from any goroutine) and end only the
// helper's goroutine (whose deferred calls still run).
type offTest struct{ testing.TB }

func (o offTest) Fatal(args ...any) {
	o.TB.Helper()
	o.TB.Error(args...)
	runtime.Goexit()
}

func (o offTest) Fatalf(format string, args ...any) {
	o.TB.Helper()
	o.TB.Errorf(format, args...)
	runtime.Goexit()
}

func (o offTest) FailNow() {
	o.TB.Fail()
	runtime.Goexit()
}

// doAsync is do on a goroutine of its own; a failed exchange fails the test
// and answers a zero response.
func (n *testNode) doAsync(t *testing.T, method, path string, body any) <-chan response {
	out := make(chan response, 1)
	go func() {
		var r response
		defer func() { out <- r }()
		r = n.do(offTest{t}, method, path, body)
	}()
	return out
}

// receiveAsync is receive on a goroutine of its own; a failed receive fails
// the test and answers no messages.
func (n *testNode) receiveAsync(t *testing.T, queue string, opts map[string]any) <-chan []map[string]any {
	out := make(chan []map[string]any, 1)
	go func() {
		var msgs []map[string]any
		defer func() { out <- msgs }()
		msgs = n.receive(offTest{t}, queue, opts)
	}()
	return out
}
