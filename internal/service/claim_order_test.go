package service

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/testdb"
)

// A node whose receives of a queue returned topic copies asks for the
// group's pending copies first, yet the group's ready messages still come
// first: a nacked copy comes back at the next receive while pending copies
// wait. A queue whose receives return plain messages is claimed ready
// first again.
func TestClaimOrderServesReadyMessagesBesidePendingCopies(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := New(pool, Options{Limits: DefaultLimits()})
	if _, _, err := s.PutTopic(ctx, "default", "tp", TopicSettings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Subscribe(ctx, "default", "tp", "g", nil, nil); err != nil {
		t.Fatal(err)
	}
	publish := func(n int) {
		t.Helper()
		in := make([]MessageInput, n)
		for i := range in {
			in[i] = MessageInput{Body: "published"}
		}
		if _, err := s.Publish(ctx, "default", "tp", in, func(int) string { return "" }); err != nil {
			t.Fatal(err)
		}
	}
	one, zero := 1, 0
	receive := func() Message {
		t.Helper()
		msgs, err := s.Receive(ctx, "default", "g", ReceiveOptions{MaxMessages: &one, WaitSeconds: &zero})
		if err != nil || len(msgs) != 1 {
			t.Fatalf("receive: %v, %d messages", err, len(msgs))
		}
		return msgs[0]
	}
	if m := s.order.mode("default", "g"); m != claimReadyFirst {
		t.Fatalf("a queue never claimed: mode %q", m)
	}
	publish(1)
	first := receive()
	if string(first.Body) != "published" || first.Tags[TopicTagKey] != "tp" {
		t.Fatalf("the copy: body %q, tags %v", first.Body, first.Tags)
	}
	if _, err := s.Nack(ctx, []string{first.ReceiptHandle}, nil); err != nil {
		t.Fatal(err)
	}
	publish(10)
	if m := s.order.mode("default", "g"); m != claimPendingFirst {
		t.Fatalf("a group whose receive returned a copy: mode %q", m)
	}
	if m := receive(); m.MessageID != first.MessageID || m.ReceiveCount != 2 {
		t.Fatalf("the receive after the nack got %s (receive count %d), want the nacked copy again",
			m.MessageID, m.ReceiveCount)
	}
	if m := receive(); string(m.Body) != "published" || m.ReceiveCount != 1 {
		t.Fatalf("a copy made first: body %q, receive count %d", m.Body, m.ReceiveCount)
	}
	if _, err := s.PurgeQueue(ctx, "default", "g"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SendBatch(ctx, "default", "g", []MessageInput{{Body: "sent"}}); err != nil {
		t.Fatal(err)
	}
	if m := receive(); string(m.Body) != "sent" {
		t.Fatalf("after the purge: %q", m.Body)
	}
	if m := s.order.mode("default", "g"); m != claimReadyFirst {
		t.Fatalf("a queue whose receive returned a plain message: mode %q", m)
	}
}
