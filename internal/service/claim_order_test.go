package service

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/testdb"
)

// A node whose receives of a queue returned topic copies asks for the
// group's pending copies first when its last claim came back short (or
// the claim asks for 32 or more), and its ready messages first otherwise
// (a claim of fewer than 32 leaves the copies it did not lease ready);
// either way the group's ready messages come first: a nacked copy comes
// back at the next receive while pending copies wait. A queue whose
// receives return plain messages is claimed ready first again.
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
	receiveAny := func() []Message {
		t.Helper()
		msgs, err := s.Receive(ctx, "default", "g", ReceiveOptions{MaxMessages: &one, WaitSeconds: &zero})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		return msgs
	}
	receive := func() Message {
		t.Helper()
		msgs := receiveAny()
		if len(msgs) != 1 {
			t.Fatalf("receive: %d messages", len(msgs))
		}
		return msgs[0]
	}
	modes := func(what, small, large string) {
		t.Helper()
		if m := s.order.mode("default", "g", 1); m != small {
			t.Fatalf("%s: a claim of one in mode %q, want %q", what, m, small)
		}
		if m := s.order.mode("default", "g", pendingFirstMin); m != large {
			t.Fatalf("%s: a claim of %d in mode %q, want %q", what, pendingFirstMin, m, large)
		}
	}
	modes("a queue never claimed", claimReadyFirst, claimReadyFirst)
	publish(1)
	first := receive()
	if string(first.Body) != "published" || first.Tags[TopicTagKey] != "tp" {
		t.Fatalf("the copy: body %q, tags %v", first.Body, first.Tags)
	}
	modes("a group whose claim returned what it asked", claimReadyFirst, claimPendingFirst)
	if _, err := s.Nack(ctx, []string{first.ReceiptHandle}, nil); err != nil {
		t.Fatal(err)
	}
	again := receive()
	if again.MessageID != first.MessageID || again.ReceiveCount != 2 {
		t.Fatalf("the receive after the nack got %s (receive count %d), want the nacked copy", again.MessageID, again.ReceiveCount)
	}
	if got := receiveAny(); len(got) != 0 {
		t.Fatalf("an emptied group returned %d messages", len(got))
	}
	modes("a group whose claim came back short", claimPendingFirst, claimPendingFirst)
	if _, err := s.Nack(ctx, []string{again.ReceiptHandle}, nil); err != nil {
		t.Fatal(err)
	}
	publish(10)
	if m := receive(); m.MessageID != first.MessageID || m.ReceiveCount != 3 {
		t.Fatalf("the receive after the nack got %s (receive count %d), want the nacked copy again",
			m.MessageID, m.ReceiveCount)
	}
	if m := receive(); string(m.Body) != "published" || m.ReceiveCount != 1 {
		t.Fatalf("a copy made first: body %q, receive count %d", m.Body, m.ReceiveCount)
	}
	modes("a group whose claim returned what it asked again", claimReadyFirst, claimPendingFirst)
	if _, err := s.PurgeQueue(ctx, "default", "g"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SendBatch(ctx, "default", "g", []MessageInput{{Body: "sent"}}); err != nil {
		t.Fatal(err)
	}
	if m := receive(); string(m.Body) != "sent" {
		t.Fatalf("after the purge: %q", m.Body)
	}
	modes("a queue whose receive returned a plain message", claimReadyFirst, claimReadyFirst)
}
