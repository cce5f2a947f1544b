package service

import (
	"fmt"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/db"
)

// A batch send's validation of 100 valid messages without tags, as the
// lifecycle bench sends them.
func BenchmarkPrepareBatch(b *testing.B) {
	s := &Service{limits: DefaultLimits()}
	in := make([]MessageInput, 100)
	for i := range in {
		in[i] = MessageInput{Body: "skipq-bench-payload-0123456789abcdefghijklmnopqrstuvwxyz-0123456"}
	}
	pathOf := func(i int) string { return fmt.Sprintf("messages[%d]", i) }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.prepare("q", in, pathOf); err != nil {
			b.Fatal(err)
		}
	}
}

// A claim's 100 rows as a receive's messages, with their receipt handles.
func BenchmarkReceivedMessages(b *testing.B) {
	now := time.Now()
	rows := make([]db.SkipqMessage, 100)
	for i := range rows {
		rows[i] = db.SkipqMessage{QueueID: 7, Sequence: int64(1000 + i), MessageID: "0194c5a2-7c1e-7c3a-9b7e-2f0c1d9e8a01",
			Body: []byte("skipq-bench-payload-0123456789abcdefghijklmnopqrstuvwxyz-0123456"), Tags: []byte("{}"),
			SentAt: now, VisibleAt: now, FirstReceivedAt: &now, ReceiveCount: 1, LeaseToken: make([]byte, tokenBytes)}
	}
	b.ReportAllocs()
	for b.Loop() {
		if msgs := receivedMessages("q", rows, true); len(msgs[99].ReceiptHandle) != 64 {
			b.Fatal(msgs[99].ReceiptHandle)
		}
	}
}
