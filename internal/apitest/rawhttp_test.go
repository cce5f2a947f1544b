package apitest

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawExchange writes raw bytes to the node and reads the responses that
// come back, as many as want; the node must answer within 30 s.
func rawExchange(t *testing.T, n *testNode, raw string, want int) []*http.Response {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(n.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	// The node may answer and close before it read everything (a 431); a
	// failed write then is no failure of the test, a missing answer is.
	go io.WriteString(c, raw)
	br := bufio.NewReader(c)
	var out []*http.Response
	for range want {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("reading answer %d of %d: %v", len(out)+1, want, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body = io.NopCloser(strings.NewReader(string(body)))
		out = append(out, resp)
	}
	return out
}

// wantRawError asserts that resp is the error envelope of docs/API.md#errors with status and code.
func wantRawError(t *testing.T, resp *http.Response, status int, code string) {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q, want JSON: %s", ct, body)
	}
	var env struct {
		Error struct {
			Code, Message, RequestID string
		}
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("not a JSON envelope: %v: %s", err, body)
	}
	e := env.Error
	if e.Code != code || e.Message == "" || e.RequestID == "" {
		t.Fatalf("envelope %+v, want code %q with a message and a request id", e, code)
	}
	if got := resp.Header.Get("X-Request-Id"); got != e.RequestID {
		t.Fatalf("X-Request-Id %q differs from the envelope's %q", got, e.RequestID)
	}
}

// Requests net/http refuses before any handler runs still get the
// envelope and an X-Request-Id, like every other answer of the node.
func TestUnparseableRequestsGetTheEnvelope(t *testing.T) {
	n := newNode(t)
	for _, tc := range []struct {
		name, raw string
		status    int
		code      string
	}{
		{"bad percent-escape in the path", "GET /v1/queues/%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400, "invalid_request"},
		{"negative Content-Length", "POST /v1/queues/q/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: -1\r\n\r\n", 400, "invalid_request"},
		{"conflicting Content-Lengths", "POST /v1/queues/q/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400, "invalid_request"},
		{"header line without a colon", "GET /healthz HTTP/1.1\r\nHost: x\r\nnot a header\r\n\r\n", 400, "invalid_request"},
		{"malformed request line", "GARBAGE\r\n\r\n", 400, "invalid_request"},
		{"control character in a header value", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n", 400, "invalid_request"},
		{"no Host header", "GET /healthz HTTP/1.1\r\n\r\n", 400, "invalid_request"},
		{"oversized header", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 80<<10) + "\r\n\r\n", 431, "request_header_fields_too_large"},
		{"oversized path", "GET /" + strings.Repeat("a", 80<<10) + " HTTP/1.1\r\nHost: x\r\n\r\n", 431, "request_header_fields_too_large"},
		{"Transfer-Encoding: gzip", "POST /v1/queues/q/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "not_implemented"},
		{"HTTP/3.0 on the request line", "GET /healthz HTTP/3.0\r\nHost: x\r\n\r\n", 505, "http_version_not_supported"},
		{"Expect other than 100-continue", "GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: x-teapot\r\n\r\n", 417, "expectation_failed"},
		{"OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRawError(t, rawExchange(t, n, tc.raw, 1)[0], tc.status, tc.code)
		})
	}
	// A bad request after good ones on a kept-alive connection is refused
	// the same way.
	t.Run("after a good request on the same connection", func(t *testing.T) {
		got := rawExchange(t, n, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/queues/%zz HTTP/1.1\r\nHost: x\r\n\r\n", 2)
		if got[0].StatusCode != http.StatusOK || got[0].Header.Get("X-Request-Id") == "" {
			t.Fatalf("first request: %d, X-Request-Id %q", got[0].StatusCode, got[0].Header.Get("X-Request-Id"))
		}
		wantRawError(t, got[1], 400, "invalid_request")
	})
	// Each refusal gets its own id, so a client's report finds its log line.
	t.Run("fresh request ids", func(t *testing.T) {
		a := rawExchange(t, n, "GARBAGE\r\n\r\n", 1)[0].Header.Get("X-Request-Id")
		b := rawExchange(t, n, "GARBAGE\r\n\r\n", 1)[0].Header.Get("X-Request-Id")
		if a == "" || a == b {
			t.Fatalf("request ids %q and %q", a, b)
		}
	})
}
