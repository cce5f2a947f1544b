package handlers

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/metrics"
	"github.com/skipq/skipq/internal/service"
)

// FuzzRoutes throws arbitrary requests at every route. The database is
// unreachable (a closed loopback port), so whatever gets past decoding and
// validation answers 503: the property is that nothing panics or answers
// 500, every error is the envelope of docs/API.md#errors, and its code is one docs/API.md
// allows for its status.
func FuzzRoutes(f *testing.F) {
	pool, err := pgxpool.New(context.Background(), "postgres://skipq@127.0.0.1:1/skipq?sslmode=disable&connect_timeout=1")
	if err != nil {
		f.Fatal(err)
	}
	defer pool.Close()
	svc := service.New(pool, service.Options{Limits: service.DefaultLimits(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	h := New(svc, Config{
		AuthOff: true, MaxRequestBytes: 1 << 16, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Ready:   func(c *gin.Context) error { return nil },
		Metrics: metrics.New(nil, nil),
	})

	seeds := []struct{ method, path, contentType, body string }{
		{"PUT", "/v1/queues/orders", "application/json", `{"visibilitySeconds": 30, "deadLetterQueue": "x.dlq"}`},
		{"POST", "/v1/queues/orders/messages", "application/json", `{"body": "hi", "tags": {"a": "b"}, "delaySeconds": 5}`},
		{"POST", "/v1/queues/orders/messages/batch", "application/json", `{"messages": [{"body": "a"}, {"metadata": "m", "bodyEncoding": "base64"}]}`},
		{"POST", "/v1/queues/orders/messages/receive", "application/json", `{"maxMessages": 10, "waitSeconds": 0, "isPeek": true}`},
		{"POST", "/v1/receipts/ack", "application/json", `{"receiptHandles": ["a", "b"]}`},
		{"POST", "/v1/receipts/visibility", "application/json", `{"receiptHandle": "x", "visibilitySeconds": 0}`},
		{"POST", "/v1/receipts/requeue", "application/json", `{"receiptHandle": "x", "queue": "other"}`},
		{"GET", "/v1/queues?prefix=a&limit=5&cursor=YQ", "", ""},
		{"GET", "/v1/queues/orders/messages?state=delayed&cursor=AAAAAAAAAAE", "", ""},
		{"GET", "/v1/dlq?sourceQueue=orders&limit=0", "", ""},
		{"POST", "/v1/queues/orders/messages/m1/redrive", "application/json", `{"toQueue": "orders"}`},
		{"POST", "/v1/queues/orders/redrive", "application/json", `{"maxMessages": 20000}`},
		{"DELETE", "/v1/queues/orders/messages/m1", "", ""},
		{"POST", "/v1/queues/orders/messages", "text/plain", `{"body": 1}`},
		{"POST", "/v1/queues/orders/messages", "application/json", `{"body": "x", "body": "y"}`},
		{"PATCH", "/v1/queues/orders", "", ""},
		// Text Postgres cannot hold, in query parameters, cursors and bodies.
		{"GET", "/v1/messages?queuePrefix=a%00&messageId=b&tag=k:%ff", "", ""},
		{"GET", "/v1/messages?cursor=eyJ0IjoxLCJxIjoiYVx1MDAwMCIsInMiOjF9", "", ""},
		{"GET", "/v1/queues?prefix=%ff&cursor=YQA", "", ""},
		{"POST", "/v1/receipts/nack", "application/json", `{"receiptHandle": "x", "reason": "a\u0000"}`},
		{"POST", "/v1/receipts/nack", "application/json", `{"receiptHandles": ["x"], "reason": "\u0000"}`},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.contentType, s.body)
	}
	f.Fuzz(func(t *testing.T, method, path, contentType, body string) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n\t") || strings.ContainsAny(method, " \r\n\t/") || method == "" {
			return // not an HTTP request line a client can send
		}
		req, err := http.NewRequest(method, "http://skipq"+path, strings.NewReader(body))
		if err != nil {
			return
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %s %q: %d %s", method, path, body, rec.Code, rec.Body)
		}
		// Text Postgres cannot hold in the path or a query parameter is
		// refused before any statement (which would fail with 22021): the
		// unreachable database's 503 means it got through.
		if rec.Code == http.StatusServiceUnavailable && holdsNonText(req) {
			t.Fatalf("%s %s: text Postgres cannot hold reached the database", method, path)
		}
		if rec.Code >= 400 {
			var env struct {
				Error struct{ Code, Message, RequestID string } `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Error.Code == "" || env.Error.Message == "" || env.Error.RequestID == "" {
				t.Fatalf("%s %s: %d without an error envelope: %s", method, path, rec.Code, rec.Body)
			}
			if !slices.Contains(specCodes[rec.Code], env.Error.Code) {
				t.Fatalf("%s %s: status %d with code %q; docs/API.md pairs %d with %v", method, path, rec.Code, env.Error.Code, rec.Code, specCodes[rec.Code])
			}
		}
	})
}

// holdsNonText reports whether the request's path or a query parameter
// holds a NUL or invalid UTF-8.
func holdsNonText(req *http.Request) bool {
	bad := func(v string) bool { return !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 }
	if bad(req.URL.Path) {
		return true
	}
	for _, vs := range req.URL.Query() {
		if slices.ContainsFunc(vs, bad) {
			return true
		}
	}
	return false
}

// specCodes is the table of docs/API.md#errors: statuses and the error codes each may
// carry, copied from docs/API.md#errors rather than from statusOf.
var specCodes = map[int][]string{
	400: {"invalid_request"},
	401: {"unauthenticated"},
	403: {"access_denied"},
	404: {"not_found", "receipt_stale"},
	405: {"method_not_allowed"},
	409: {"idempotency_conflict", "not_dead_lettered"},
	413: {"payload_too_large"},
	415: {"unsupported_media_type"},
	429: {"too_many_requests"},
	500: {"internal_error"},
	503: {"unavailable"},
}
