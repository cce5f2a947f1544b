package handlers

import (
	"encoding/json"
	"maps"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/internal/service"
)

// encodeMessages runs writeMessages and returns the answer.
func encodeMessages(t *testing.T, msgs []service.Message) []byte {
	t.Helper()
	gin.SetMode(gin.ReleaseMode)
	rec := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(rec)
	writeMessages(c, msgs)
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("status %d, Content-Type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	return rec.Body.Bytes()
}

// The response budget's estimate (service.MessageOverheadBytes plus the
// fields the claim statement measures) must not be smaller than what the
// HTTP layer writes for a message, or a receive could pass
// SKIPQ_MAX_RESPONSE_BYTES by more than the escaping of its text.
func TestMessageOverheadCoversTheEncoding(t *testing.T) {
	now := time.Date(2026, 11, 29, 15, 4, 5, 123e6, time.UTC)
	reRouted := "source.queue"
	reason := strings.Repeat("r", service.MaxReasonBytes)
	longQueue := strings.Repeat("q", 256) // a source queue's name at its longest
	full := service.Message{
		MessageID:       "order-7",
		ReceiptHandle:   strings.Repeat("A", 64), // 48 bytes, base64url without padding
		Queue:           "orders.us-east",
		Sequence:        math.MaxInt64,
		ClientID:        "client-1",
		Metadata:        `{"k":"v"}`,
		Body:            []byte{0xff, 0x00, 0x10, 0x20, 0x30},
		BodyBinary:      true,
		Tags:            map[string]string{"a": "1", "bb": "22"},
		SentAt:          now,
		FirstReceivedAt: &now,
		ReceiveCount:    math.MaxInt32,
		VisibleUntil:    &now,
		DelayedTo:       &now,
		ExpiresAt:       &now,
		ReRoutedFrom:    &reRouted,
		DeadLetteredAt:  &now,
		LastFailure: &service.Failure{Cause: service.CauseLeaseExpired, Reason: &reason, At: now,
			ReceiveCount: math.MaxInt32},
		DeadLetter: &service.DeadLetter{Cause: service.CauseLeaseExpired, Reason: &reason,
			ReceiveCount: math.MaxInt32, SourceQueue: longQueue, At: now},
	}
	empty := full
	empty.MessageID, empty.Queue, empty.ClientID, empty.Metadata = "", "", "", ""
	empty.Body, empty.Tags, empty.ReRoutedFrom = nil, nil, new("")

	// What the claim statement measures: base64 body, metadata, tags as
	// JSON text (jsonb's text form is at least Go's), ids, reRoutedFrom.
	measured := func(m service.Message) int {
		// The failures are stored in the tags (at least as long as Go's
		// compact JSON of them, inside a JSON string).
		stored := maps.Clone(m.Tags)
		if stored == nil {
			stored = map[string]string{}
		}
		if f := m.LastFailure; f != nil {
			doc, _ := json.Marshal(map[string]any{"cause": f.Cause, "reason": f.Reason, "at": f.At, "receiveCount": f.ReceiveCount})
			stored["skipq.failure"] = string(doc)
		}
		if d := m.DeadLetter; d != nil {
			doc, _ := json.Marshal(map[string]any{"cause": d.Cause, "reason": d.Reason, "receiveCount": d.ReceiveCount})
			stored["skipq.deadLetter"] = string(doc)
		}
		tags, _ := json.Marshal(stored)
		return (len(m.Body)+2)/3*4 + len(m.Metadata) + len(tags) + len(m.MessageID) + len(m.ClientID) +
			len(*m.ReRoutedFrom) + len(m.Queue)
	}
	envelope := len(encodeMessages(t, nil)) // {"messages":[]}
	for name, m := range map[string]service.Message{"every field at its longest fixed form": empty, "with content": full} {
		one := len(encodeMessages(t, []service.Message{m})) - envelope
		two := len(encodeMessages(t, []service.Message{m, m})) - envelope
		per := max(one, two-one) // the second carries the separator
		if est := service.MessageOverheadBytes + measured(m); per > est {
			t.Errorf("%s: %d bytes on the wire, estimated %d: raise service.MessageOverheadBytes", name, per, est)
		}
		t.Logf("%s: %d bytes, %d of them fixed", name, per, per-measured(m))
	}
}

// writeMessages streams exactly the answer of docs/API.md#receive: a JSON object whose
// messages decode as written, text and base64 bodies alike, without HTML
// escaping.
func TestWriteMessagesShape(t *testing.T) {
	msgs := []service.Message{
		{MessageID: "a", Queue: "q", Body: []byte("<b>&</b>"), ReceiptHandle: "h"},
		{MessageID: "b", Queue: "q", Body: []byte{0, 1, 2, 0xff}, BodyBinary: true},
	}
	raw := encodeMessages(t, msgs)
	if !strings.Contains(string(raw), `"body":"<b>&</b>"`) {
		t.Errorf("text body escaped: %s", raw)
	}
	var out struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("not JSON: %v: %s", err, raw)
	}
	if len(out.Messages) != 2 || out.Messages[0]["body"] != "<b>&</b>" || out.Messages[0]["bodyEncoding"] != "text" ||
		out.Messages[0]["receiptHandle"] != "h" || out.Messages[1]["body"] != "AAEC/w==" ||
		out.Messages[1]["bodyEncoding"] != "base64" || out.Messages[1]["receiptHandle"] != nil {
		t.Errorf("decoded %v", out.Messages)
	}
	if empty := encodeMessages(t, nil); string(empty) != "{\"messages\":[]}\n" {
		t.Errorf("no messages: %s", empty)
	}
}
