package handlers

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/wire"
)

// statusOf maps each service error kind to its status and code: the one
// place where service errors become HTTP.
func statusOf(k service.Kind) (int, string) {
	switch k {
	case service.KindInvalid:
		return http.StatusBadRequest, "invalid_request"
	case service.KindNotFound:
		return http.StatusNotFound, "not_found"
	case service.KindReceiptStale:
		return http.StatusNotFound, "receipt_stale"
	case service.KindIdempotencyConflict:
		return http.StatusConflict, "idempotency_conflict"
	case service.KindNotDeadLettered:
		return http.StatusConflict, "not_dead_lettered"
	case service.KindTooLarge:
		return http.StatusRequestEntityTooLarge, "payload_too_large"
	case service.KindUnavailable:
		return http.StatusServiceUnavailable, "unavailable"
	case service.KindTooManyRequests:
		return http.StatusTooManyRequests, "too_many_requests"
	case service.KindQueueTypeMismatch:
		return http.StatusConflict, "queue_type_mismatch"
	case service.KindConflict:
		return http.StatusConflict, "conflict"
	}
	return http.StatusInternalServerError, "internal_error"
}

// codeOf is the envelope code of a service error kind (used in settle lists).
func codeOf(k service.Kind) string {
	_, code := statusOf(k)
	return code
}

// fail writes err as an error envelope and aborts the request.
func fail(c *gin.Context, err error) {
	var e *service.Error
	if !errors.As(err, &e) {
		e = &service.Error{Kind: service.KindInternal, Message: "internal error", Err: err}
	}
	status, code := statusOf(e.Kind)
	msg := e.Message
	if e.Kind == service.KindInternal {
		msg = "internal error; see the server log for this request id"
	}
	if e.Kind == service.KindInternal || e.Kind == service.KindUnavailable {
		_ = c.Error(err) // logged by the request logger
	}
	if e.Kind == service.KindUnavailable || e.Kind == service.KindTooManyRequests {
		// Both pass soon: a database that comes back, a waiting receive
		// that ends. A second is the rate limiter's unit too.
		c.Header("Retry-After", "1")
	}
	abortWith(c, status, code, msg, e.Issues)
}

// abortWith writes an envelope with an explicit status and code: for errors
// the HTTP layer itself detects (routing, media type, body size, auth).
func abortWith(c *gin.Context, status int, code, msg string, issues []service.Issue) {
	c.Abort()
	answerJSON(c, status, envelope(code, msg, requestID(c), issues))
}

// envelope is the error envelope of docs/API.md#errors.
func envelope(code, msg, requestID string, issues []service.Issue) wire.Error {
	e := wire.Error{Error: wire.ErrorDetail{Code: code, Message: msg, RequestID: requestID}}
	for _, is := range issues {
		e.Error.Issues = append(e.Error.Issues, wire.Issue(is))
	}
	return e
}
