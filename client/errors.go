package client

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/skipq/skipq/wire"
)

// Error codes of docs/API.md (Error.Code).
const (
	CodeInvalidRequest       = "invalid_request"
	CodeUnauthenticated      = "unauthenticated"
	CodeAccessDenied         = "access_denied"
	CodeNotFound             = "not_found"
	CodeReceiptStale         = "receipt_stale"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeIdempotencyConflict  = "idempotency_conflict"
	CodeNotDeadLettered      = "not_dead_lettered"
	CodePayloadTooLarge      = "payload_too_large"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeTooManyRequests      = "too_many_requests"
	CodeInternalError        = "internal_error"
	CodeUnavailable          = "unavailable"
)

// Error is a non-2xx answer of the service. Use errors.As to get it:
//
//	var e *client.Error
//	if errors.As(err, &e) && e.Code == client.CodeInvalidRequest { … e.Issues … }
//
// An answer that is not skipq's error envelope (from a proxy, say) has an
// empty Code and the status text and start of the body as Message.
type Error struct {
	Status     int     // HTTP status
	Code       string  // "not_found", "receipt_stale", … (the Code* constants)
	Message    string  // human-readable
	RequestID  string  // the request id to look for in the server's log
	Issues     []Issue // what was wrong with the request (400, 413)
	RetryAfter time.Duration

	hasRetryAfter bool
}

// Issue is one problem with a request: the field's path
// ("messages[2].delaySeconds") and what is wrong with it.
type Issue = wire.Issue

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("skipq:")
	if e.Status != 0 { // 0: one message's error in an answer that succeeded
		fmt.Fprintf(&b, " %d", e.Status)
	}
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	b.WriteString(e.IssuesText())
	if e.RequestID != "" {
		b.WriteString(" [request " + e.RequestID + "]")
	}
	return b.String()
}

func asError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// IsNotFound reports whether err is a 404 not_found: no such queue, message
// or route (another tenant's queue looks the same). A stale receipt handle
// is not "not found": see IsReceiptStale.
func IsNotFound(err error) bool {
	e, ok := asError(err)
	return ok && (e.Code == CodeNotFound || (e.Code == "" && e.Status == http.StatusNotFound))
}

// IsReceiptStale reports whether err is a 404 receipt_stale: the handle
// settles nothing (the message was received again, settled, moved, expired
// or deleted, or the handle is forged). After a retried settle request it
// can also mean that an earlier attempt succeeded (see the package
// documentation).
func IsReceiptStale(err error) bool {
	e, ok := asError(err)
	return ok && e.Code == CodeReceiptStale
}

// IsConflict reports whether err is a 409: idempotency_conflict (the same
// messageId with different content) or not_dead_lettered (a redrive of a
// message that was not dead-lettered).
func IsConflict(err error) bool {
	e, ok := asError(err)
	return ok && e.Status == http.StatusConflict
}

// ErrSettled is returned by the settle methods of a Received message that
// was already settled through it (acked, nacked or requeued): the client
// sends nothing, so a message is never settled twice by one consumer.
var ErrSettled = errors.New("skipq: the message was already settled")

// ErrNoReceipt is returned by the settle methods of a message received
// without a receipt handle (autoAck).
var ErrNoReceipt = errors.New("skipq: the message has no receipt handle (received with autoAck)")

// IssuesText is the error's issues as " (path: message; …)", or "" when
// there are none.
func (e *Error) IssuesText() string {
	if len(e.Issues) == 0 {
		return ""
	}
	var b strings.Builder
	for i, is := range e.Issues {
		if i == 0 {
			b.WriteString(" (")
		} else {
			b.WriteString("; ")
		}
		if is.Path != "" {
			b.WriteString(is.Path + ": ")
		}
		b.WriteString(is.Message)
	}
	b.WriteString(")")
	return b.String()
}
