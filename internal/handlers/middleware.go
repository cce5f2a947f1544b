package handlers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/internal/metrics"
	"github.com/skipq/skipq/internal/service"
)

const requestIDKey = "skipq.requestID"

func requestID(c *gin.Context) string { return c.GetString(requestIDKey) }

// withRequestID gives every request an id, echoed in X-Request-Id: the
// client's when it is an id as the API takes them (service.IsID), else a
// new one, so logs never carry arbitrary client bytes.
func withRequestID(c *gin.Context) {
	id := c.GetHeader("X-Request-Id")
	if !service.IsID(id) {
		id = newRequestID()
	}
	c.Set(requestIDKey, id)
	c.Header("X-Request-Id", id)
	c.Next()
}

func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// logRequests writes one JSON line per request and times it.
func logRequests(log *slog.Logger, m *metrics.Metrics) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		m.ObserveRequest(c.Request.Method, c.FullPath(), c.Writer.Status(), time.Since(start))
		level := slog.LevelInfo
		if len(c.Errors) > 0 && c.Writer.Status() >= 500 {
			level = slog.LevelError
		}
		ctx := c.Request.Context()
		if !log.Enabled(ctx, level) {
			return
		}
		// The record is built here rather than by log.Log: that one also
		// records its caller (runtime.Callers, almost half of a request's log
		// line at batch 1), which no handler of the node prints, and boxes
		// every attribute into an interface first.
		r := slog.NewRecord(time.Now(), level, "request", 0)
		r.AddAttrs(
			slog.String("method", c.Request.Method),
			slog.String("route", c.FullPath()),
			slog.Int("status", c.Writer.Status()),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
			slog.String("request_id", requestID(c)),
		)
		if id, ok := identityOf(c); ok {
			r.AddAttrs(slog.String("tenant", id.Tenant))
		}
		if len(c.Errors) > 0 {
			r.AddAttrs(slog.String("error", c.Errors.String()))
		}
		_ = log.Handler().Handle(ctx, r)
	}
}

// recoverPanics turns a panic into a logged 500 envelope.
func recoverPanics(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r)
			}
			_ = c.Error(fmt.Errorf("panic: %v", r))
			abortWith(c, http.StatusInternalServerError, "internal_error",
				"internal error; see the server log for this request id", nil)
		}
	}()
	c.Next()
}

// limitBody refuses a body over max bytes: at once when Content-Length says
// so, otherwise when reading crosses the limit (decode reports it), so an
// oversized body is never read whole.
func limitBody(max int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.ContentLength > max {
			abortWith(c, http.StatusRequestEntityTooLarge, "payload_too_large",
				fmt.Sprintf("the request body exceeds %d bytes", max), nil)
			return
		}
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, max)
		c.Next()
	}
}

// RequestTimeout bounds every request but a receive's wait: a database that
// stops answering turns into a 503, never a hang.
const RequestTimeout = 30 * time.Second

// deadline gives the request's context a deadline.
func deadline(d time.Duration) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), d)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}
}
