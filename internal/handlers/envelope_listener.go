package handlers

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// EnvelopeListener wraps ln so that the answers net/http writes by itself,
// before any handler runs, are docs/API.md error envelopes too.
//
// net/http refuses a request it cannot parse (bad request line, header
// line, Content-Length, URL escape, Host; headers over MaxHeaderBytes; an
// unknown Transfer-Encoding; an HTTP version it does not speak; an Expect
// other than 100-continue) by writing a plain-text response straight to the
// connection and closing it; no hook reaches those paths. Each is a single
// Write of a fixed shape that no handler can produce (the handlers always
// send X-Request-Id), so the connection recognises exactly those shapes and
// writes the envelope instead. Anything else passes through untouched:
// should a future net/http change its shapes, its answers go out as before
// and the raw-socket tests in apitest fail.
func EnvelopeListener(ln net.Listener, log *slog.Logger) net.Listener {
	return &envelopeListener{Listener: ln, log: log}
}

type envelopeListener struct {
	net.Listener
	log *slog.Logger
}

func (l *envelopeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &envelopeConn{Conn: c, log: l.log}, nil
}

type envelopeConn struct {
	net.Conn
	log *slog.Logger
}

func (c *envelopeConn) Write(p []byte) (int, error) {
	status, reason, ok := parsePreHandlerError(p)
	if !ok {
		return c.Conn.Write(p)
	}
	id := newRequestID()
	code, msg := preHandlerError(status, reason)
	if c.log != nil {
		// The client sees only this id: the log line is what ties it to a
		// refused request.
		c.log.Info("request refused before routing", "status", status, "code", code,
			"request_id", id, "remote_addr", c.RemoteAddr().String())
	}
	if _, err := c.Conn.Write(envelopeResponse(status, code, msg, id)); err != nil {
		return 0, err
	}
	// net/http only learns whether its own bytes went out.
	return len(p), nil
}

// CloseWrite keeps net/http's half-close after a 431 (closeWriteAndWait):
// without it the client may lose the answer to a reset.
func (c *envelopeConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ReadFrom keeps the TCP connection's splice/sendfile path for bodies; only
// bodies come this way (headers are always Written first).
func (c *envelopeConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(c.Conn, r)
}

// netHTTPErrorHeaders is the header block of net/http's own error answers
// (server.go, conn.serve); the handlers never send text/plain.
const netHTTPErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

var netHTTPErrorHeadersBytes = []byte(netHTTPErrorHeaders)

// parsePreHandlerError recognises one of net/http's pre-handler answers in
// a single write and returns its status and net/http's reason text (""
// when it gives none):
//
//	HTTP/1.1 431 Request Header Fields Too Large<errorHeaders>431 Request Header Fields Too Large
//	HTTP/1.1 400 Bad Request<errorHeaders>400 Bad Request
//	HTTP/1.1 400 Bad Request: missing required Host header<errorHeaders>400 Bad Request: missing required Host header
//	HTTP/1.1 501 Not Implemented<errorHeaders>Unsupported transfer encoding
//	HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nDate: …\r\nContent-Length: 0\r\n\r\n
func parsePreHandlerError(p []byte) (status int, reason string, ok bool) {
	// Every write of every answer comes here: look at its bytes for what
	// each of those shapes must hold before copying them into a string.
	if !bytes.Contains(p, netHTTPErrorHeadersBytes) && !looksLikeExpectationFailed(p) {
		return 0, "", false
	}
	s := string(p)
	if expectationFailed(s) {
		return http.StatusExpectationFailed, "", true
	}
	rest, found := strings.CutPrefix(s, "HTTP/1.1 ")
	if !found {
		return 0, "", false
	}
	statusLine, body, found := strings.Cut(rest, netHTTPErrorHeaders)
	if !found || len(statusLine) < 4 || statusLine[3] != ' ' || strings.ContainsAny(statusLine, "\r\n") {
		return 0, "", false
	}
	status, err := strconv.Atoi(statusLine[:3])
	if err != nil || http.StatusText(status) == "" {
		return 0, "", false
	}
	text := statusLine[4:]
	if status == http.StatusNotImplemented {
		if text != http.StatusText(status) || body != "Unsupported transfer encoding" {
			return 0, "", false
		}
		return status, body, true
	}
	// Every other shape repeats its status line as the body.
	if body != statusLine || (text != http.StatusText(status) && !strings.HasPrefix(text, http.StatusText(status)+": ")) {
		return 0, "", false
	}
	reason, _ = strings.CutPrefix(text, http.StatusText(status))
	return status, strings.TrimPrefix(reason, ": "), true
}

// looksLikeExpectationFailed is what expectationFailed needs of p's start,
// on p's bytes.
func looksLikeExpectationFailed(p []byte) bool {
	rest, ok := bytes.CutPrefix(p, []byte("HTTP/1."))
	return ok && len(rest) > 0 && bytes.HasPrefix(rest[1:], []byte(" 417 Expectation Failed\r\n"))
}

// expectationFailed recognises net/http's answer to an Expect other than
// 100-continue (response.sendExpectationFailed): a bare 417 with no
// X-Request-Id, which no handler sends.
func expectationFailed(s string) bool {
	var found bool
	for _, proto := range []string{"HTTP/1.1 ", "HTTP/1.0 "} {
		if s, found = strings.CutPrefix(s, proto+"417 Expectation Failed\r\n"); found {
			break
		}
	}
	if !found {
		return false
	}
	head, tail, found := strings.Cut(s, "\r\n\r\n")
	if !found || tail != "" {
		return false
	}
	for line := range strings.SplitSeq(head, "\r\n") {
		name, _, _ := strings.Cut(line, ":")
		switch http.CanonicalHeaderKey(name) {
		case "Connection", "Date", "Content-Length":
		default:
			return false
		}
	}
	return true
}

// preHandlerError is the envelope code and message of a status net/http
// answers by itself. Codes follow the table of docs/API.md#errors, whose codes are the
// status's reason phrase in snake case (payload_too_large,
// method_not_allowed): 400 is invalid_request as in docs/API.md#errors; the others
// have no row there and get their reason phrase.
func preHandlerError(status int, reason string) (code, msg string) {
	switch status {
	case http.StatusBadRequest:
		msg = "malformed HTTP request: a bad request line, header line, Content-Length or %-escape in the path"
		if reason != "" {
			msg = reason
		}
		return "invalid_request", msg
	case http.StatusRequestHeaderFieldsTooLarge:
		return "request_header_fields_too_large", "the request line and headers are too large"
	case http.StatusNotImplemented:
		return "not_implemented", "unsupported Transfer-Encoding: only chunked is supported"
	case http.StatusHTTPVersionNotSupported:
		return "http_version_not_supported", "unsupported HTTP version: use HTTP/1.1"
	case http.StatusExpectationFailed:
		return "expectation_failed", "unsupported Expect header: only 100-continue is supported"
	}
	msg = http.StatusText(status)
	if reason != "" {
		msg += ": " + reason
	}
	return strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "_"), msg
}

// envelopeResponse is a whole HTTP/1.1 answer carrying the envelope; the
// connection closes after it, as net/http's own answer said.
func envelopeResponse(status int, code, msg, id string) []byte {
	body, _ := json.Marshal(envelope(code, msg, id, nil))
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\n")
	b.WriteString("Content-Type: application/json; charset=utf-8\r\n")
	b.WriteString("X-Request-Id: " + id + "\r\n")
	b.WriteString("Date: " + time.Now().UTC().Format(http.TimeFormat) + "\r\n")
	b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	b.WriteString("Connection: close\r\n\r\n")
	b.Write(body)
	return b.Bytes()
}
