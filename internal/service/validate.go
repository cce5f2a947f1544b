package service

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// IsID reports whether s is an id as the API takes them,
// ^[A-Za-z0-9._:-]{1,128}$: a message id, a group id, a request id. A
// loop rather than a regexp: FIFO sends check one per message, and the Go
// client sends a request id with every request (about 40 ns against the
// regexp's 1.4 µs).
func IsID(s string) bool { return isToken(s, 128, true) }

// IsTagKey reports whether s is a tag key, ^[A-Za-z0-9_.-]{1,64}$ (a loop,
// as IsID: a send checks every key of every message).
func IsTagKey(s string) bool { return isToken(s, 64, false) }

// isToken reports whether s is 1 to max of A-Z, a-z, 0-9, '.', '_', '-'
// and, when colon, ':'.
func isToken(s string, max int, colon bool) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		case c == ':' && colon:
		default:
			return false
		}
	}
	return true
}

// ValidQueueName checks the queue name rule of docs/API.md#model and returns what is wrong,
// or "" when the name is valid.
func ValidQueueName(name string) string {
	switch {
	case name == "":
		return "must not be empty"
	case len(name) > maxQueueNameBytes:
		return fmt.Sprintf("must be at most %d bytes", maxQueueNameBytes)
	case !utf8.ValidString(name):
		return "must be valid UTF-8"
	case strings.HasSuffix(name, "."):
		return `must not end with "."`
	}
	for _, r := range name {
		switch {
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return "must not contain whitespace or control characters"
		case r == '*' || r == '>' || r == '/':
			return `must not contain "*", ">" or "/"`
		}
	}
	return ""
}

// checkDeadLetterQueue checks a dead-letter queue setting of queue (nil or ""
// mean none). A queue cannot be its own dead-letter queue: its messages
// would be moved back into it with a fresh receive count, forever.
func checkDeadLetterQueue(is *issues, path, queue string, dlq *string) {
	switch {
	case dlq == nil || *dlq == "":
	case ValidQueueName(*dlq) != "":
		is.add(path, "%s", ValidQueueName(*dlq))
	case *dlq == queue:
		is.add(path, "must not be the queue itself")
	}
}

func checkQueueName(path, name string) *Error {
	if msg := ValidQueueName(name); msg != "" {
		return Invalid(Issue{Path: path, Message: msg})
	}
	return nil
}

// issues collects validation problems of one request.
type issues []Issue

func (is *issues) add(path, format string, args ...any) {
	*is = append(*is, Issue{Path: path, Message: fmt.Sprintf(format, args...)})
}

// between checks an optional integer against [lo, hi].
func (is *issues) between(path string, v *int, lo, hi int) {
	if v != nil && (*v < lo || *v > hi) {
		is.add(path, "%s", betweenMsg(lo, hi))
	}
}

func (is issues) err() error {
	if len(is) == 0 {
		return nil
	}
	return Invalid(is...)
}

// text checks a free-text field that is stored as Postgres text: it must be
// valid UTF-8 and hold no NUL, which text cannot store (the body is bytea
// and may hold anything).
func (is *issues) text(path, v string) {
	if msg := TextProblem(v); msg != "" {
		is.add(path, "%s", msg)
	}
}

// TextProblem says what keeps v from being stored as Postgres text, or ""
// (for the packages beside service that validate their own text: auth).
func TextProblem(v string) string {
	switch {
	case !utf8.ValidString(v):
		return "must be valid UTF-8"
	case strings.IndexByte(v, 0) >= 0:
		return "must not contain NUL characters (U+0000)"
	}
	return ""
}

// CheckTexts checks the keys and values of a map stored as text or as
// jsonb strings (which cannot hold NUL either), by path.key.
func CheckTexts(path string, m map[string]string) error {
	var is issues
	for k, v := range m {
		is.text(path, k)
		is.text(join(path, k), v)
	}
	return is.err()
}

// checkReason checks a nack's reason (nil: none): stored as text, at most
// MaxReasonBytes.
func checkReason(reason *string) error {
	var is issues
	switch {
	case reason == nil:
	case len(*reason) > MaxReasonBytes:
		is.add("reason", "must be at most %d bytes", MaxReasonBytes)
	default:
		is.text("reason", *reason)
	}
	return is.err()
}

// checkTextKey checks a key decoded from a cursor (a queue name) that is
// compared as text in SQL: bytes that text cannot hold (22021) are not a
// key this server wrote, and must not reach Postgres.
func checkTextKey(path, key string) error {
	if TextProblem(key) != "" {
		return Invalid(Issue{Path: path, Message: "is not a cursor this server issued"})
	}
	return nil
}

func join(prefix, field string) string {
	if prefix == "" {
		return field
	}
	return prefix + "." + field
}

func betweenMsg(lo, hi int) string { return fmt.Sprintf("must be between %d and %d", lo, hi) }
