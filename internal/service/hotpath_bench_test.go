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

// A batch send of 100 validated messages as skipq.message_insert's
// parameters.
func BenchmarkInsertParams(b *testing.B) {
	s := &Service{limits: DefaultLimits(), now: func() *time.Time { return nil }}
	in := make([]MessageInput, 100)
	for i := range in {
		in[i] = MessageInput{Body: "skipq-bench-payload-0123456789abcdefghijklmnopqrstuvwxyz-0123456"}
	}
	msgs, err := s.prepare("q", in, func(i int) string { return fmt.Sprintf("messages[%d]", i) })
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if p := s.insertParams("default", "q", msgs); len(p.MessageIds) != 100 {
			b.Fatal(len(p.MessageIds))
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

// An ack of 100 handles without its statement: the handles parsed, merged
// into the statement's arrays, and each credited from the rows it returned.
func BenchmarkAckHandles(b *testing.B) {
	handles := make([]string, 100)
	rows := make([]db.MessageAckByReceiptRow, 100)
	for i := range handles {
		token := make([]byte, tokenBytes)
		token[0] = byte(i)
		handles[i] = encodeReceipt(7, int64(1000+i), token)
		rows[i] = db.MessageAckByReceiptRow{QueueID: 7, Sequence: int64(1000 + i), Token: token}
	}
	b.ReportAllocs()
	for b.Loop() {
		c := &settleCall{rs: parseReceipts(handles)}
		m := merge([]*settleCall{c})
		changed := map[settledKey]bool{}
		for _, r := range rows {
			changed[settled(r.QueueID, r.Sequence, r.Token)] = true
		}
		m.answer([]*settleCall{c}, changed)
		if c.res.Succeeded != len(handles) || len(m.tokens) != len(handles) {
			b.Fatal(c.res)
		}
	}
}
