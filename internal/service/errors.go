package service

import (
	"errors"
	"fmt"
)

// Kind classifies an Error; the HTTP layer maps each kind to one status and
// code in one place.
type Kind int

const (
	KindInternal Kind = iota
	KindInvalid
	KindNotFound
	KindReceiptStale
	KindIdempotencyConflict
	KindNotDeadLettered
	KindTooLarge
	KindUnavailable
	// KindTooManyRequests: the node is at a capacity limit; retry later.
	KindTooManyRequests
	// KindQueueTypeMismatch: a move between a FIFO and a standard queue.
	KindQueueTypeMismatch
	// KindConflict: the request contradicts what exists (a topic's fifo).
	KindConflict
)

// Issue is one problem with the input, at a path like "messages[2].body".
type Issue struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Error is the one error type the service returns to its callers.
type Error struct {
	Kind    Kind
	Message string
	Issues  []Issue
	Err     error // the cause, for logs; never shown to clients
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Invalid is a 400-class error carrying issues.
func Invalid(issues ...Issue) *Error {
	msg := "the request is invalid"
	if len(issues) == 1 {
		msg = issues[0].Message
		if issues[0].Path != "" {
			msg = issues[0].Path + ": " + msg
		}
	}
	return &Error{Kind: KindInvalid, Message: msg, Issues: issues}
}

func notFound(format string, args ...any) *Error {
	return &Error{Kind: KindNotFound, Message: fmt.Sprintf(format, args...)}
}

// ErrReceiptStale is returned for a receipt handle that settles nothing.
var ErrReceiptStale = &Error{Kind: KindReceiptStale, Message: "the receipt handle is stale, unknown or forged"}

// ErrTooManyWaiters is returned for a receive that would wait while the node
// already holds Limits.MaxWaiters waiting receives. Nothing was claimed, so
// the receive may simply be retried (after a pause, or on another node).
var ErrTooManyWaiters = &Error{Kind: KindTooManyRequests,
	Message: "this node holds as many waiting receives as it may (SKIPQ_MAX_WAITERS); retry later or with waitSeconds 0"}

// KindOf returns the kind of err (KindInternal for foreign errors).
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}
