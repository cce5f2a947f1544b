package handlers

import (
	"encoding/base64"
	"time"

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
	Body            string            `json:"body"`
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
	if m.BodyBinary {
		out.Body, out.BodyEncoding = base64.StdEncoding.EncodeToString(m.Body), "base64"
	} else {
		out.Body, out.BodyEncoding = string(m.Body), "text"
	}
	return out
}

func toMessagesJSON(ms []service.Message) []messageJSON {
	out := make([]messageJSON, len(ms))
	for i, m := range ms {
		out[i] = toMessageJSON(m)
	}
	return out
}
