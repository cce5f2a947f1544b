package wire

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// standardJSON is what encoding/json writes for v without HTML escaping.
func standardJSON(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func checkAppendJSON(t testing.TB, m *Message) {
	t.Helper()
	want := standardJSON(t, m)
	if got := m.AppendJSON(nil); !bytes.Equal(got, want) {
		t.Errorf("AppendJSON:\n got %s\nwant %s", got, want)
	}
}

func TestAppendJSONIsEncodingJSON(t *testing.T) {
	now := At(time.Date(2026, 12, 2, 4, 5, 6, 789_123_456, time.FixedZone("x", 3600)))
	s := func(v string) *string { return &v }
	full := Message{
		MessageID: "id-1", ReceiptHandle: s("handle"), Queue: "orders.eu", Sequence: -42,
		ClientID: "c", Metadata: `{"k":"v"}`, Body: "body", BodyEncoding: EncodingText,
		Tags:              map[string]string{"b": "2", "a": "1", "": "empty", "é": "<&>"},
		MessageAttributes: map[string]MessageAttribute{"n": {DataType: "Number", StringValue: s("1")}, "b": {DataType: "Binary", BinaryValue: []byte{0, 1}}},
		SentAt:            now, FirstReceivedAt: &now, ReceiveCount: 3, VisibleUntil: &now, DelayedTo: &now,
		ExpiresAt: &now, ReRoutedFrom: s("dlq-source"), DeadLetteredAt: &now, GroupID: s("g"),
		LastFailure: &Failure{Cause: "nack", Reason: s("why"), At: now, ReceiveCount: 2},
		DeadLetter:  &DeadLetter{Cause: "lease_expired", ReceiveCount: 5, SourceQueue: "q", At: now},
		State:       StateAvailable, VisibleAt: &now, AckedAt: &now,
	}
	checkAppendJSON(t, &full)
	checkAppendJSON(t, &Message{})
	checkAppendJSON(t, &Message{Tags: map[string]string{}, SentAt: At(time.Date(12345, 1, 1, 0, 0, 0, 0, time.UTC))})
	for _, text := range []string{
		"", "plain", `quote " backslash \ slash /`, "<b>&amp;</b>", "\x00\x01\x07\b\t\n\v\f\r\x1b\x1f\x7f",
		"é 日本 🙂", "\u2028\u2029", "bad \xff\xfe utf-8 \xc3", "\xed\xa0\x80 surrogate", "end\\",
	} {
		m := full
		m.MessageID, m.Body, m.Metadata, m.Queue, m.ClientID = text, text, text, text, text
		m.ReceiptHandle, m.GroupID, m.ReRoutedFrom = &text, &text, &text
		m.Tags = map[string]string{text: text, "k" + text: "v"}
		m.State = State(text)
		checkAppendJSON(t, &m)
	}
}

func TestSendResultAppendJSONIsEncodingJSON(t *testing.T) {
	now := At(time.Date(2026, 12, 2, 4, 5, 6, 789_000_000, time.UTC))
	results := []SendResult{
		{MessageID: "0193a5c4-7f1e-7b3a-9c1d-5e6f7a8b9c0d", Sequence: 7, SentAt: now},
		{MessageID: "k\"<&>\u2028\xff", Sequence: -1, SentAt: now, DelayedTo: &now, ExpiresAt: &now, Duplicate: true},
	}
	for _, r := range []SendBatchResult{{}, {Results: []SendResult{}}, {Results: results}} {
		want := standardJSON(t, &r)
		if got := r.AppendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("AppendJSON:\n got %s\nwant %s", got, want)
		}
	}
}

func FuzzAppendJSON(f *testing.F) {
	f.Add("body", "meta", "tag", int64(1))
	f.Add("\x00\u2028\xff", `"\`, "<>&", int64(-1))
	f.Fuzz(func(t *testing.T, body, metadata, tag string, seq int64) {
		m := Message{MessageID: body, Body: body, Metadata: metadata, Sequence: seq, Tags: map[string]string{tag: body, "x": tag},
			ReceiptHandle: &metadata, SentAt: At(time.Unix(seq%(1<<35), seq%1e9))}
		checkAppendJSON(t, &m)
	})
}
