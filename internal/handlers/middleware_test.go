package handlers

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/internal/metrics"
)

// requestLogEngine routes GET /v1/queues/:queue through withRequestID and
// logRequests to a handler that answers 200 as tenant t1.
func requestLogEngine(log *slog.Logger) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.Use(withRequestID, logRequests(log, metrics.New(nil, nil)))
	e.GET("/v1/queues/:queue", func(c *gin.Context) {
		c.Set(identityKey, Identity{Tenant: "t1"})
		c.Status(http.StatusOK)
	})
	return e
}

// One JSON line a request, with the fields operators search by.
func TestLogRequestsLine(t *testing.T) {
	var logged bytes.Buffer
	e := requestLogEngine(slog.New(slog.NewJSONHandler(&logged, nil)))
	req := httptest.NewRequest(http.MethodGet, "/v1/queues/q1", nil)
	req.Header.Set("X-Request-Id", "req-1")
	e.ServeHTTP(httptest.NewRecorder(), req)

	var line map[string]any
	if err := json.Unmarshal(logged.Bytes(), &line); err != nil {
		t.Fatalf("%v: %q", err, logged.String())
	}
	want := map[string]any{"level": "INFO", "msg": "request", "method": "GET", "route": "/v1/queues/:queue",
		"status": 200.0, "request_id": "req-1", "tenant": "t1"}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s: got %v, want %v (line %q)", k, line[k], v, logged.String())
		}
	}
	if _, ok := line["duration_ms"].(float64); !ok {
		t.Errorf("no duration_ms: %q", logged.String())
	}
	if _, ok := line["time"].(string); !ok || len(line) != len(want)+2 {
		t.Errorf("fields: got %q, want time, duration_ms and %v", logged.String(), want)
	}
}

// What the middleware costs a request, its log line written to nowhere.
func BenchmarkLogRequests(b *testing.B) {
	e := requestLogEngine(slog.New(slog.NewJSONHandler(io.Discard, nil)))
	req := httptest.NewRequest(http.MethodGet, "/v1/queues/q1", nil)
	req.Header.Set("X-Request-Id", "req-1")
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		e.ServeHTTP(w, req)
	}
}
