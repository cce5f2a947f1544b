package service

import (
	"bytes"
	"strings"
	"testing"
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
	f.Fuzz(func(t *testing.T, cursor string) {
		checks := []func() error{
			func() error { _, err := decodeCursor(cursor); return err },
			func() error { _, err := decodeSequenceCursor(cursor); return err },
			func() error { _, _, err := decodeDLQCursor(cursor); return err },
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
		if err == nil {
			if len(msgs) != 1 || msgs[0].MessageID == "" || len(msgs[0].hash) != 32 {
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

// Queue names: never panics; accepted names obey SPEC §3.
func FuzzQueueName(f *testing.F) {
	for _, s := range []string{"orders", "payments.us-east", "orders.", "orders.*", "a b", "", "é", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if ValidQueueName(name) != "" {
			return
		}
		if name == "" || len(name) > 256 || strings.HasSuffix(name, ".") || strings.ContainsAny(name, "*>/ \t\r\n") {
			t.Fatalf("accepted %q", name)
		}
	})
}
