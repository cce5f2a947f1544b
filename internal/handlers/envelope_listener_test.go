package handlers

import (
	"strconv"
	"strings"
	"testing"
)

// Only net/http's own pre-handler answers are rewritten; anything that
// merely resembles one goes out byte for byte.
func TestParsePreHandlerError(t *testing.T) {
	const eh = netHTTPErrorHeaders
	for _, tc := range []struct {
		write  string
		status int // 0: pass through
		reason string
	}{
		{"HTTP/1.1 400 Bad Request" + eh + "400 Bad Request", 400, ""},
		{"HTTP/1.1 400 Bad Request: missing required Host header" + eh + "400 Bad Request: missing required Host header", 400, "missing required Host header"},
		{"HTTP/1.1 431 Request Header Fields Too Large" + eh + "431 Request Header Fields Too Large", 431, ""},
		{"HTTP/1.1 501 Not Implemented" + eh + "Unsupported transfer encoding", 501, "Unsupported transfer encoding"},
		{"HTTP/1.1 505 HTTP Version Not Supported: unsupported protocol version" + eh + "505 HTTP Version Not Supported: unsupported protocol version", 505, "unsupported protocol version"},
		{"HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nDate: Mon, 30 Nov 2026 15:00:03 GMT\r\nContent-Length: 0\r\n\r\n", 417, ""},
		{"HTTP/1.0 417 Expectation Failed\r\nConnection: close\r\nDate: Mon, 30 Nov 2026 15:00:03 GMT\r\nContent-Length: 0\r\n\r\n", 417, ""},

		// A handler's answers: JSON, X-Request-Id.
		{"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json; charset=utf-8\r\nX-Request-Id: a\r\nConnection: close\r\n\r\n{}", 0, ""},
		{"HTTP/1.1 417 Expectation Failed\r\nX-Request-Id: a\r\nContent-Length: 0\r\n\r\n", 0, ""},
		// Near misses: another body, a split write, extra headers, trailing bytes.
		{"HTTP/1.1 400 Bad Request" + eh + "something else", 0, ""},
		{"HTTP/1.1 400 Bad Request" + eh, 0, ""},
		{"HTTP/1.1 400 Bad Request", 0, ""},
		{"HTTP/1.1 400 Bad Request\r\nX-Extra: 1" + eh + "400 Bad Request", 0, ""},
		{"HTTP/1.1 501 Not Implemented" + eh + "Unsupported transfer encoding!", 0, ""},
		{"HTTP/1.1 400 Something" + eh + "400 Something", 0, ""},
		{"HTTP/1.1 999 Bad Request" + eh + "999 Bad Request", 0, ""},
		{"HTTP/1.0 400 Bad Request" + eh + "400 Bad Request", 0, ""},
		{"HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nContent-Length: 0\r\n\r\nx", 0, ""},
		{"", 0, ""},
		{`{"body":"HTTP/1.1 400 Bad Request"}`, 0, ""},
	} {
		status, reason, ok := parsePreHandlerError([]byte(tc.write))
		if ok != (tc.status != 0) || status != tc.status || reason != tc.reason {
			t.Errorf("%q: got %d %q %v, want %d %q", tc.write, status, reason, ok, tc.status, tc.reason)
		}
	}
}

// The rewritten answer is one well-formed HTTP/1.1 response whose
// Content-Length matches its body.
func TestEnvelopeResponse(t *testing.T) {
	got := string(envelopeResponse(431, "request_header_fields_too_large", "too large", "abc"))
	head, body, ok := strings.Cut(got, "\r\n\r\n")
	if !ok || !strings.HasPrefix(head, "HTTP/1.1 431 Request Header Fields Too Large\r\n") {
		t.Fatalf("malformed: %q", got)
	}
	want := `{"error":{"code":"request_header_fields_too_large","message":"too large","requestId":"abc"}}`
	if body != want || !strings.Contains(head, "\r\nContent-Length: "+strconv.Itoa(len(want))+"\r\n") || !strings.Contains(head, "\r\nX-Request-Id: abc\r\n") {
		t.Fatalf("got %q", got)
	}
}

// Every answer's bytes pass parsePreHandlerError on their way out: a
// receive of 100 messages is one write of about 30 KB.
func BenchmarkParsePreHandlerErrorPassThrough(b *testing.B) {
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\nX-Request-Id: a\r\nTransfer-Encoding: chunked\r\n\r\n" +
		strings.Repeat(`{"messageId":"0194c5a2-7c1e-7c3a-9b7e-2f0c1d9e8a01","body":"skipq-bench-payload"},`, 300))
	b.SetBytes(int64(len(answer)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := parsePreHandlerError(answer); ok {
			b.Fatal("a handler's answer was taken for net/http's")
		}
	}
}
