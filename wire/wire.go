// Package wire holds the HTTP API's request and response bodies (docs/API.md):
// the one definition the handlers encode, the client decodes and the CLI
// prints. It depends on nothing of the server, so the client can import it.
//
// internal/handlers/openapi.json describes the same shapes; a test in this package
// holds every type here to its schema there, so a field cannot be added in
// one place only.
package wire

import (
	"bytes"
	"fmt"
	"time"
)

// TimeFormat is every timestamp on the wire: RFC 3339, UTC, milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// Time is an instant as the API writes it (TimeFormat); it reads any RFC
// 3339 time. The embedded time.Time gives it every method of one.
type Time struct{ time.Time }

// At is t on the wire.
func At(t time.Time) Time { return Time{t} }

// AtPtr is *t on the wire; nil (JSON null) stays nil.
func AtPtr(t *time.Time) *Time {
	if t == nil {
		return nil
	}
	return &Time{*t}
}

// String is t in TimeFormat.
func (t Time) String() string { return t.UTC().Format(TimeFormat) }

// MarshalJSON writes t in TimeFormat.
func (t Time) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(TimeFormat)+2)
	b = append(b, '"')
	b = appendTime(b, t.UTC())
	return append(b, '"'), nil
}

// appendTime appends u (UTC) in TimeFormat. Every answer of a receive
// writes two or three times per message: by hand it allocates nothing,
// where time's AppendFormat allocated once per call.
func appendTime(b []byte, u time.Time) []byte {
	year, month, day := u.Date()
	if year < 0 || year > 9999 {
		return u.AppendFormat(b, TimeFormat)
	}
	hour, minute, second := u.Clock()
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, second, 2)
	b = append(b, '.')
	b = appendDigits(b, u.Nanosecond()/1e6, 3)
	return append(b, 'Z')
}

// appendDigits appends n (≥ 0) in exactly width decimal digits.
func appendDigits(b []byte, n, width int) []byte {
	for i := width - 1; i >= 0; i-- {
		d := n
		for range i {
			d /= 10
		}
		b = append(b, byte('0'+d%10))
	}
	return b
}

// UnmarshalJSON reads an RFC 3339 time; null leaves t unchanged, as
// encoding/json does for time.Time.
func (t *Time) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return fmt.Errorf("wire: time %s is not a JSON string", b)
	}
	v, err := time.Parse(time.RFC3339Nano, string(b[1:len(b)-1]))
	if err != nil {
		return fmt.Errorf("wire: %w", err)
	}
	t.Time = v
	return nil
}

// Error is the error envelope of docs/API.md#errors: {"error": {...}}.
type Error struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the envelope's content.
type ErrorDetail struct {
	Code      string  `json:"code"`
	Message   string  `json:"message"`
	RequestID string  `json:"requestId"`
	Issues    []Issue `json:"issues,omitempty"`
}

// Issue is one problem with a request: the field's path
// ("messages[2].delaySeconds") and what is wrong with it.
type Issue struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}
