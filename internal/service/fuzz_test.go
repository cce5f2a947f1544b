package service

import (
	"bytes"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// Receipt handles come from anyone: parsing never panics, and a handle that
// parses re-encodes to itself.
func FuzzParseReceipt(f *testing.F) {
	f.Add(encodeReceipt(1, 2, bytes.Repeat([]byte{7}, tokenBytes)))
	f.Add("")
	f.Add("garbage")
	f.Add(strings.Repeat("A", 64))
	f.Add(strings.Repeat("/", 64))
	f.Fuzz(func(t *testing.T, handle string) {
		r, ok := parseReceipt(handle)
		if !ok {
			return
		}
		if again := encodeReceipt(r.queueID, r.sequence, r.token); again != handle {
			t.Fatalf("%q parsed, but re-encodes as %q", handle, again)
		}
	})
}

// Cursors come from anyone: decoding never panics and answers a clean
// invalid_request issue at "cursor".
func FuzzCursors(f *testing.F) {
	f.Add(encodeSequenceCursor(42))
	f.Add(encodeCursor("orders"))
	f.Add("!!")
	f.Add("")
	// Keys that text cannot hold: a search cursor naming a queue with a
	// NUL, NUL bytes, invalid UTF-8.
	f.Add(encodeSearchCursor(searchKey{SentAt: 1, Queue: "a\x00", Sequence: 1}))
	f.Add("AAAAAAAAAAAAAAAAAAAA")
	f.Add("__4")
	f.Fuzz(func(t *testing.T, cursor string) {
		// Round trips: whatever this server encodes decodes to itself.
		if key, err := decodeCursor(encodeCursor(cursor)); err != nil || key != cursor {
			t.Fatalf("key %q round-trips to %q (%v)", cursor, key, err)
		}
		seq := int64(len(cursor))<<40 ^ int64(crc(cursor))
		if got, err := decodeSequenceCursor(encodeSequenceCursor(seq)); err != nil || got != seq {
			t.Fatalf("sequence %d round-trips to %d (%v)", seq, got, err)
		}
		at := time.UnixMicro(seq).UTC()
		if gotAt, gotSeq, err := decodeDLQCursor(encodeDLQCursor(at, -seq)); err != nil || gotAt == nil || !gotAt.Equal(at) || gotSeq != -seq {
			t.Fatalf("dead-letter cursor (%s, %d) round-trips to (%v, %d) (%v)", at, -seq, gotAt, gotSeq, err)
		}
		checks := []func() error{
			func() error { _, err := decodeCursor(cursor); return err },
			func() error { _, err := decodeSequenceCursor(cursor); return err },
			func() error { _, _, err := decodeDLQCursor(cursor); return err },
			func() error { _, err := decodeSearchCursor(cursor); return err },
			func() error { _, err := queueNamePage(1, "", cursor); return err },
		}
		// What the text cursors hand on is compared as text in SQL.
		if k, err := decodeSearchCursor(cursor); err == nil && k != nil && TextProblem(k.Queue) != "" {
			t.Fatalf("search cursor %q names queue %q, which text cannot hold", cursor, k.Queue)
		}
		if after, err := queueNamePage(1, "", cursor); err == nil && TextProblem(after) != "" {
			t.Fatalf("queue cursor %q names %q, which text cannot hold", cursor, after)
		}
		for _, check := range checks {
			if err := check(); err != nil {
				e, ok := err.(*Error)
				if !ok || e.Kind != KindInvalid || len(e.Issues) != 1 || e.Issues[0].Path != "cursor" {
					t.Fatalf("cursor %q: %#v", cursor, err)
				}
			}
		}
	})
}

// Message validation takes anything: it never panics, and it either
// accepts a message or rejects it with issues (400) or as too large (413).
func FuzzPrepareMessage(f *testing.F) {
	f.Add("hello", "", "", "k", "v", "", "", 0, -1)
	f.Add("AAE=", "base64", "meta", "skipq.x", "v", "id-1", "dlq.", 5, 1209601)
	f.Add("", "hex", "", "a b", strings.Repeat("v", 2000), "bad id", "a*b", -5, 0)
	s := &Service{limits: DefaultLimits()}
	s.limits.MaxMessageBytes = 64
	f.Fuzz(func(t *testing.T, body, encoding, metadata, tagKey, tagValue, messageID, dlq string, delay, expiration int) {
		in := MessageInput{
			Body: body, BodyEncoding: encoding, Metadata: metadata, MessageID: messageID,
			Tags: map[string]string{tagKey: tagValue}, DelaySeconds: &delay, ExpirationSeconds: &expiration,
			DeadLetterQueue: &dlq,
		}
		msgs, err := s.prepare("q", []MessageInput{in}, func(int) string { return "messages[0]" })
		if want := specVerdict(s.limits, in); KindOf(err) != want && !(err == nil && want == kindAccepted) {
			t.Fatalf("%+v: got %v, the documented rules say %v", in, err, want)
		}
		if err == nil {
			if len(msgs) != 1 || msgs[0].MessageID == "" {
				t.Fatalf("accepted but malformed: %+v", msgs)
			}
			return
		}
		e, ok := err.(*Error)
		if !ok || (e.Kind != KindInvalid && e.Kind != KindTooLarge) || len(e.Issues) == 0 {
			t.Fatalf("rejection is not a 4xx with issues: %#v", err)
		}
		for _, is := range e.Issues {
			if !strings.HasPrefix(is.Path, "messages[0].") {
				t.Fatalf("issue path %q is outside the message", is.Path)
			}
		}
	})
}

// Queue names: never panics, and accepted exactly when the queue name rule of docs/API.md#model,
// written again here from docs/API.md#model's words, accepts.
func FuzzQueueName(f *testing.F) {
	for _, s := range []string{"orders", "payments.us-east", "orders.", "orders.*", "a b", "", "é", "\x00",
		"a\u00a0b", "a\u2028b", "a\u0085b", "\xff", strings.Repeat("a", 256), strings.Repeat("a", 257), "a>b", "a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		accepted := ValidQueueName(name) == ""
		if accepted != specQueueName(name) {
			t.Fatalf("%q: accepted %v, the documented rule says %v", name, accepted, !accepted)
		}
	})
}

// specQueueName is docs/API.md#model: 1-256 bytes; no whitespace or control
// characters; no "*", ">" or "/"; not ending with ".". (Text must be UTF-8
// to be stored at all.)
func specQueueName(name string) bool {
	if len(name) < 1 || len(name) > 256 || !utf8.ValidString(name) || strings.HasSuffix(name, ".") {
		return false
	}
	return !strings.ContainsFunc(name, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || r == '*' || r == '>' || r == '/'
	})
}

// crc is a cheap deterministic number from a string, to derive fuzzed
// integers from the one fuzzed input.
func crc(s string) uint32 {
	var h uint32 = 2166136261
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

// kindAccepted marks a message the documented rules accept.
const kindAccepted Kind = -1

// specVerdict judges one message by the rules of docs/API.md, written again here
// independently of prepare: 400 for anything malformed, else 413 when too
// large, else accepted.
func specVerdict(l Limits, m MessageInput) Kind {
	body := []byte(m.Body)
	invalid := false
	switch m.BodyEncoding {
	case "", "text":
	case "base64":
		b, err := base64.StdEncoding.DecodeString(m.Body)
		invalid = invalid || err != nil
		body = b
	default:
		invalid = true
	}
	invalid = invalid || (len(body) == 0 && m.Metadata == "")
	invalid = invalid || (m.MessageID != "" && !regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`).MatchString(m.MessageID))
	text := func(v string) bool { return utf8.ValidString(v) && !strings.ContainsRune(v, 0) }
	invalid = invalid || !text(m.Metadata) || !text(m.ClientID) || len(m.ClientID) > 256
	invalid = invalid || len(m.Tags) > 32
	for k, v := range m.Tags {
		invalid = invalid || !regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`).MatchString(k) ||
			strings.HasPrefix(k, "skipq.") || len(v) > 1024 || !text(v)
	}
	out := func(v *int, hi int) bool { return v != nil && (*v < 0 || *v > hi) }
	invalid = invalid || out(m.DelaySeconds, l.MaxDelaySeconds) || out(m.ExpirationSeconds, l.MaxExpirationSeconds) ||
		out(m.MaxReceiveCount, l.MaxReceiveCount)
	if m.DeadLetterQueue != nil && *m.DeadLetterQueue != "" {
		invalid = invalid || !specQueueName(*m.DeadLetterQueue) || *m.DeadLetterQueue == "q"
	}
	switch {
	case invalid:
		return KindInvalid
	case len(body)+len(m.Metadata) > l.MaxMessageBytes:
		return KindTooLarge
	}
	return kindAccepted
}
