package wire

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends m as JSON: byte for byte what encoding/json writes
// for it without HTML escaping (a test holds it to that), without
// reflection. A receive answers up to its response budget of messages,
// and encoding/json's reflection and the validation of each timestamp's
// MarshalJSON output were an eighth of a node's CPU at batch 100. The
// fields that only dead letters and SQS messages carry go through
// encoding/json.
func (m *Message) AppendJSON(b []byte) []byte {
	b = append(b, `{"messageId":`...)
	b = appendString(b, m.MessageID)
	b = append(b, `,"receiptHandle":`...)
	b = appendStringPtr(b, m.ReceiptHandle)
	b = append(b, `,"queue":`...)
	b = appendString(b, m.Queue)
	b = append(b, `,"sequence":`...)
	b = strconv.AppendInt(b, m.Sequence, 10)
	b = append(b, `,"clientId":`...)
	b = appendString(b, m.ClientID)
	b = append(b, `,"metadata":`...)
	b = appendString(b, m.Metadata)
	b = append(b, `,"body":`...)
	b = appendString(b, m.Body)
	b = append(b, `,"bodyEncoding":`...)
	b = appendString(b, m.BodyEncoding)
	b = append(b, `,"tags":`...)
	b = appendStringMap(b, m.Tags)
	b = append(b, `,"messageAttributes":`...)
	b = appendMarshaled(b, m.MessageAttributes, m.MessageAttributes == nil)
	b = append(b, `,"sentAt":`...)
	b = m.SentAt.appendJSON(b)
	b = append(b, `,"firstReceivedAt":`...)
	b = appendTimePtr(b, m.FirstReceivedAt)
	b = append(b, `,"receiveCount":`...)
	b = strconv.AppendInt(b, int64(m.ReceiveCount), 10)
	b = append(b, `,"visibleUntil":`...)
	b = appendTimePtr(b, m.VisibleUntil)
	b = append(b, `,"delayedTo":`...)
	b = appendTimePtr(b, m.DelayedTo)
	b = append(b, `,"expiresAt":`...)
	b = appendTimePtr(b, m.ExpiresAt)
	b = append(b, `,"reRoutedFrom":`...)
	b = appendStringPtr(b, m.ReRoutedFrom)
	b = append(b, `,"deadLetteredAt":`...)
	b = appendTimePtr(b, m.DeadLetteredAt)
	b = append(b, `,"groupId":`...)
	b = appendStringPtr(b, m.GroupID)
	b = append(b, `,"lastFailure":`...)
	b = appendMarshaled(b, m.LastFailure, m.LastFailure == nil)
	b = append(b, `,"deadLetter":`...)
	b = appendMarshaled(b, m.DeadLetter, m.DeadLetter == nil)
	if m.State != "" {
		b = append(b, `,"state":`...)
		b = appendString(b, string(m.State))
	}
	if m.VisibleAt != nil {
		b = append(b, `,"visibleAt":`...)
		b = m.VisibleAt.appendJSON(b)
	}
	if m.AckedAt != nil {
		b = append(b, `,"ackedAt":`...)
		b = m.AckedAt.appendJSON(b)
	}
	return append(b, '}')
}

// appendJSON appends t as MarshalJSON writes it.
func (t Time) appendJSON(b []byte) []byte {
	b = append(b, '"')
	b = appendTime(b, t.UTC())
	return append(b, '"')
}

func appendTimePtr(b []byte, t *Time) []byte {
	if t == nil {
		return append(b, "null"...)
	}
	return t.appendJSON(b)
}

func appendStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendString(b, *s)
}

// appendStringMap appends m with its keys sorted, as encoding/json does.
func appendStringMap(b []byte, m map[string]string) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendString(b, m[k])
	}
	return append(b, '}')
}

// appendMarshaled appends v through encoding/json (null when isNil).
func appendMarshaled(b []byte, v any, isNil bool) []byte {
	if isNil {
		return append(b, "null"...)
	}
	var w sliceWriter
	enc := json.NewEncoder(&w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Every field of these types marshals; an error would be a bug
		// in encoding/json.
		return append(b, "null"...)
	}
	return append(b, w[:len(w)-1]...) // without Encode's newline
}

type sliceWriter []byte

func (w *sliceWriter) Write(p []byte) (int, error) {
	*w = append(*w, p...)
	return len(p), nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string as encoding/json does without
// HTML escaping: control characters escaped (\b, \f, \n, \r, \t by name),
// invalid UTF-8 as U+FFFD, and U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendJSON appends r as encoding/json writes it without HTML escaping
// (see Message.AppendJSON): a batch send answers one per message.
func (r *SendResult) AppendJSON(b []byte) []byte {
	b = append(b, `{"messageId":`...)
	b = appendString(b, r.MessageID)
	b = append(b, `,"sequence":`...)
	b = strconv.AppendInt(b, r.Sequence, 10)
	b = append(b, `,"sentAt":`...)
	b = r.SentAt.appendJSON(b)
	b = append(b, `,"delayedTo":`...)
	b = appendTimePtr(b, r.DelayedTo)
	b = append(b, `,"expiresAt":`...)
	b = appendTimePtr(b, r.ExpiresAt)
	b = append(b, `,"duplicate":`...)
	b = strconv.AppendBool(b, r.Duplicate)
	return append(b, '}')
}

// AppendJSON appends r as encoding/json writes it without HTML escaping.
func (r *SendBatchResult) AppendJSON(b []byte) []byte {
	if r.Results == nil {
		return append(b, `{"results":null}`...)
	}
	b = append(b, `{"results":[`...)
	for i := range r.Results {
		if i > 0 {
			b = append(b, ',')
		}
		b = r.Results[i].AppendJSON(b)
	}
	return append(b, "]}"...)
}
