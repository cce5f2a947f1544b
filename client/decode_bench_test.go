package client

import (
	"strconv"
	"testing"
	"time"

	"github.com/skipq/skipq/wire"
)

// receiveAnswer is a node's answer to a receive of n messages as the
// lifecycle bench sends them.
func receiveAnswer(n int) []byte {
	now := time.Date(2026, 12, 2, 10, 0, 0, 123e6, time.UTC)
	handle := "AAAAAAAAAAEAAAAAAAAAZAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	b := []byte(`{"messages":[`)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		m := wire.Message{MessageID: "0194c5a2-7c1e-7c3a-9b7e-2f0c1d9e8a" + strconv.Itoa(10+i%90), ReceiptHandle: &handle,
			Queue: "lifecycle-b100-p4", Sequence: int64(1000 + i), Body: "skipq-bench-payload-0123456789abcdefghijklmnopqrstuvwxyz-0123456",
			BodyEncoding: wire.EncodingText, Tags: map[string]string{}, SentAt: wire.At(now),
			FirstReceivedAt: wire.AtPtr(&now), ReceiveCount: 1, VisibleUntil: wire.AtPtr(&now), ExpiresAt: wire.AtPtr(&now)}
		b = m.AppendJSON(b)
	}
	return append(b, `]}`...)
}

// What a consumer's client spends on the answer to a receive of 100.
func BenchmarkDecodeReceive(b *testing.B) {
	raw := receiveAnswer(100)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		var out wire.ReceiveResult
		if err := decodeAnswer(raw, &out); err != nil {
			b.Fatal(err)
		}
		for _, w := range out.Messages {
			if _, err := stored(w); err != nil {
				b.Fatal(err)
			}
		}
	}
}
