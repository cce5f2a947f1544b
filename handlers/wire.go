package handlers

import (
	"encoding/json"
	"io"
	"net/http"
	"time"
	"unsafe"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/service"
)

// Response shapes of SPEC §4. Timestamps are RFC 3339 UTC with milliseconds;
// absent values are null.

const timeFormat = "2006-01-02T15:04:05.000Z"

func ts(t time.Time) string { return t.UTC().Format(timeFormat) }

func tsPtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := ts(*t)
	return &s
}

type queueJSON struct {
	Name               string     `json:"name"`
	CreatedAt          string     `json:"createdAt"`
	VisibilitySeconds  int        `json:"visibilitySeconds"`
	ReceiveWaitSeconds int        `json:"receiveWaitSeconds"`
	DelaySeconds       int        `json:"delaySeconds"`
	ExpirationSeconds  int        `json:"expirationSeconds"`
	MaxReceiveCount    int        `json:"maxReceiveCount"`
	DeadLetterQueue    string     `json:"deadLetterQueue"`
	DedupWindowSeconds int        `json:"dedupWindowSeconds"`
	Stats              *statsJSON `json:"stats,omitempty"`
}

type statsJSON struct {
	Available         int64   `json:"available"`
	Delayed           int64   `json:"delayed"`
	InFlight          int64   `json:"inFlight"`
	Total             int64   `json:"total"`
	OldestAvailableAt *string `json:"oldestAvailableAt"`
}

func toQueueJSON(q service.Queue) queueJSON {
	out := queueJSON{
		Name: q.Name, CreatedAt: ts(q.CreatedAt),
		VisibilitySeconds: q.VisibilitySeconds, ReceiveWaitSeconds: q.ReceiveWaitSeconds,
		DelaySeconds: q.DelaySeconds, ExpirationSeconds: q.ExpirationSeconds,
		MaxReceiveCount: q.MaxReceiveCount, DeadLetterQueue: q.DeadLetterQueue,
		DedupWindowSeconds: q.DedupWindowSeconds,
	}
	if st := q.Stats; st != nil {
		out.Stats = &statsJSON{
			Available: st.Available, Delayed: st.Delayed, InFlight: st.InFlight,
			Total:             st.Available + st.Delayed + st.InFlight,
			OldestAvailableAt: tsPtr(st.OldestAvailableAt),
		}
	}
	return out
}

type sendResultJSON struct {
	MessageID string  `json:"messageId"`
	Sequence  int64   `json:"sequence"`
	SentAt    string  `json:"sentAt"`
	DelayedTo *string `json:"delayedTo"`
	ExpiresAt *string `json:"expiresAt"`
	Duplicate bool    `json:"duplicate"`
}

func toSendResultJSON(r service.SendResult) sendResultJSON {
	return sendResultJSON{
		MessageID: r.MessageID, Sequence: r.Sequence, SentAt: ts(r.SentAt),
		DelayedTo: tsPtr(r.DelayedTo), ExpiresAt: tsPtr(r.ExpiresAt), Duplicate: r.Duplicate,
	}
}

type messageJSON struct {
	MessageID       string            `json:"messageId"`
	ReceiptHandle   *string           `json:"receiptHandle"`
	Queue           string            `json:"queue"`
	Sequence        int64             `json:"sequence"`
	ClientID        string            `json:"clientId"`
	Metadata        string            `json:"metadata"`
	Body            any               `json:"body"` // string (text) or []byte (encoded as base64 in place)
	BodyEncoding    string            `json:"bodyEncoding"`
	Tags            map[string]string `json:"tags"`
	SentAt          string            `json:"sentAt"`
	FirstReceivedAt *string           `json:"firstReceivedAt"`
	ReceiveCount    int               `json:"receiveCount"`
	VisibleUntil    *string           `json:"visibleUntil"`
	DelayedTo       *string           `json:"delayedTo"`
	ExpiresAt       *string           `json:"expiresAt"`
	ReRoutedFrom    *string           `json:"reRoutedFrom"`
	DeadLetteredAt  *string           `json:"deadLetteredAt"`
}

func toMessageJSON(m service.Message) messageJSON {
	out := messageJSON{
		MessageID: m.MessageID, Queue: m.Queue, Sequence: m.Sequence,
		ClientID: m.ClientID, Metadata: m.Metadata, Tags: m.Tags,
		SentAt: ts(m.SentAt), FirstReceivedAt: tsPtr(m.FirstReceivedAt),
		ReceiveCount: m.ReceiveCount, VisibleUntil: tsPtr(m.VisibleUntil),
		DelayedTo: tsPtr(m.DelayedTo), ExpiresAt: tsPtr(m.ExpiresAt),
		ReRoutedFrom: m.ReRoutedFrom, DeadLetteredAt: tsPtr(m.DeadLetteredAt),
	}
	if m.ReceiptHandle != "" {
		out.ReceiptHandle = &m.ReceiptHandle
	}
	if out.Tags == nil {
		out.Tags = map[string]string{}
	}
	// The body is never copied on its way out: encoding/json writes a
	// []byte as standard base64 (with padding) straight into its buffer, and
	// a text body is shown to it as a string over the same bytes, which
	// nothing modifies after the row was scanned.
	if m.BodyBinary {
		out.Body, out.BodyEncoding = m.Body, "base64"
	} else {
		out.Body, out.BodyEncoding = unsafe.String(unsafe.SliceData(m.Body), len(m.Body)), "text"
	}
	return out
}

// writeMessages answers 200 {"messages": [...]} (a receive).
func writeMessages(c *gin.Context, msgs []service.Message) {
	writePage(c, len(msgs), func(i int) any {
		m := toMessageJSON(msgs[i])
		msgs[i] = service.Message{} // m holds the body until it is written
		return m
	}, "")
}

// writePage answers 200 {"messages": [...], "nextCursor": ...}, encoding
// one message at a time straight into the response: an answer of up to
// SKIPQ_MAX_RESPONSE_BYTES and more is never built whole in memory. item
// returns message i's JSON form and should let go of the message, so its
// body can be collected once written while the rest is still being sent.
// A write error means the client left; there is no one to tell.
func writePage(c *gin.Context, n int, item func(i int) any, next string) {
	c.Header("Content-Type", "application/json; charset=utf-8")
	c.Status(http.StatusOK)
	w := c.Writer
	enc := json.NewEncoder(w)
	// Bodies are JSON strings, not HTML: escaping <, > and & would make
	// them up to 6 times longer for nothing.
	enc.SetEscapeHTML(false)
	if _, err := io.WriteString(w, `{"messages":[`); err != nil {
		return
	}
	for i := range n {
		if i > 0 {
			if _, err := io.WriteString(w, ","); err != nil {
				return
			}
		}
		if err := enc.Encode(item(i)); err != nil {
			return
		}
	}
	end := "]}"
	if next != "" {
		cursor, _ := json.Marshal(next) // a string always marshals
		end = `],"nextCursor":` + string(cursor) + "}"
	}
	_, _ = io.WriteString(w, end)
}
