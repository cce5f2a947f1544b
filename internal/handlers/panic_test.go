package handlers_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/skipq/skipq/internal/handlers"
	"github.com/skipq/skipq/internal/metrics"
)

// A handler that panics answers the 500 internal_error envelope of docs/API.md#errors with
// the request id, which the error log line carries too. The router is the
// real one; its service is nil, so the first route that reaches the
// service panics (no test hook in the handlers).
func TestHandlerPanicIsAnInternalErrorEnvelope(t *testing.T) {
	var logs bytes.Buffer
	h := handlers.New(nil, handlers.Config{
		AuthOff: true, MaxRequestBytes: 1 << 20, Metrics: metrics.New(nil, nil),
		Log: slog.New(slog.NewJSONHandler(&logs, nil)),
	})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/queues", nil))

	var body struct {
		Error struct{ Code, Message, RequestID string }
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("status %d, body %q: not an error envelope: %v", rec.Code, rec.Body, err)
	}
	id := rec.Header().Get("X-Request-Id")
	if rec.Code != http.StatusInternalServerError || body.Error.Code != "internal_error" ||
		body.Error.Message == "" || body.Error.RequestID == "" || body.Error.RequestID != id {
		t.Fatalf("status %d, X-Request-Id %q, body %s; want 500 internal_error with the request id", rec.Code, id, rec.Body)
	}
	var logged bool
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l struct {
			Level, Error string
			RequestID    string `json:"request_id"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Level == "ERROR" && l.RequestID == id && strings.Contains(l.Error, "panic") {
			logged = true
		}
	}
	if !logged {
		t.Fatalf("no error log line with request id %q and the panic:\n%s", id, logs.String())
	}
}
