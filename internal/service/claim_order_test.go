package service

import (
	"context"
	"testing"
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
	s := newTopicGroups(t, "g")
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

// A shared claim tells the claim order what it returned once, for all its
// calls: three receives served by one claim that found one copy leave the
// group's last claim short (the next claim asks pending first), whatever
// order their goroutines would have reported in. The same holds for the
// claims of several queues made in one statement.
func TestSharedClaimRecordsShortOnce(t *testing.T) {
	ctx := context.Background()
	s := newTopicGroups(t, "g1", "g2")
	if _, err := s.Publish(ctx, "default", "tp", []MessageInput{{Body: "one"}}, func(int) string { return "" }); err != nil {
		t.Fatal(err)
	}
	calls := func(queue string, n int) []*claimCall {
		out := make([]*claimCall, n)
		for i := range out {
			out[i] = &claimCall{tenant: "default", queue: queue}
		}
		return out
	}
	claimedRows := func(cs []*claimCall) int {
		n := 0
		for _, c := range cs {
			if c.err != nil {
				t.Fatal(c.err)
			}
			n += len(c.rows)
		}
		return n
	}
	g1 := calls("g1", 3)
	if blocked := s.claimTogether(ctx, s.own, "default", "g1", g1); len(blocked) != 0 || claimedRows(g1) != 1 {
		t.Fatalf("g1: %d blocked, %d rows, want the one copy", len(blocked), claimedRows(g1))
	}
	if m := s.order.mode("default", "g1", 1); m != claimPendingFirst {
		t.Fatalf("after a shared claim of three that found one copy: mode %q, want %q", m, claimPendingFirst)
	}
	if _, err := s.Publish(ctx, "default", "tp", []MessageInput{{Body: "two"}}, func(int) string { return "" }); err != nil {
		t.Fatal(err)
	}
	keys := []claimKey{{"default", "g1", -1, 0}, {"default", "g2", -1, 0}}
	groups := map[claimKey][]*claimCall{keys[0]: calls("g1", 1), keys[1]: calls("g2", 4)}
	if blocked, failed := s.claimQueuesTogether(ctx, s.own, keys, groups); len(blocked) != 0 || failed {
		t.Fatalf("claims of g1 and g2: %d blocked, failed %v", len(blocked), failed)
	}
	if n1, n2 := claimedRows(groups[keys[0]]), claimedRows(groups[keys[1]]); n1 != 1 || n2 != 2 {
		t.Fatalf("claims of g1 and g2 got %d and %d rows, want 1 and 2", n1, n2)
	}
	if m := s.order.mode("default", "g1", 1); m != claimReadyFirst {
		t.Fatalf("g1 after a claim that got what it asked: mode %q, want %q", m, claimReadyFirst)
	}
	if m := s.order.mode("default", "g2", 1); m != claimPendingFirst {
		t.Fatalf("g2 after a claim of four that found two: mode %q, want %q", m, claimPendingFirst)
	}
}
