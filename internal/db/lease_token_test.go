package db_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/skipq/skipq/internal/db"
)

// A claim derives its messages' lease tokens from one secret it draws
// (docs/DESIGN.md, "Receipt handles"): each message of a claim still gets
// a token of its own, 32 bytes like a drawn one, unlike any other claim's,
// a sibling's token settles nothing on another message's key (a shared
// claim hands one statement's messages to different receivers), and a new
// lease of a message makes its old token stale.
func TestClaimTokensAreTheMessagesOwn(t *testing.T) {
	f := setup(t, 5)
	ctx := context.Background()
	batch := claim(t, f.q, 3, nil)
	single := claim(t, f.q, 1, nil)
	if len(batch) != 3 || len(single) != 1 {
		t.Fatalf("claimed %d and %d messages, want 3 and 1", len(batch), len(single))
	}
	all := append(append([]db.SkipqMessage{}, batch...), single...)
	tokensOfTheirOwn(t, all)
	if _, err := f.q.MessageNack(ctx, db.MessageNackParams{QueueIds: []int64{batch[0].QueueID},
		Sequences: []int64{batch[0].Sequence}, Tokens: [][]byte{batch[0].LeaseToken}, ServerMaxReceiveCount: 10}); err != nil {
		t.Fatal(err)
	}
	again := claim(t, f.q, 2, nil)
	if len(again) != 2 || again[0].Sequence != batch[0].Sequence || bytes.Equal(again[0].LeaseToken, batch[0].LeaseToken) {
		t.Fatalf("the claim after the nack: %+v, want message %d first with a new token", again, batch[0].Sequence)
	}
	if rows, err := f.q.MessageAckByReceipt(ctx, ackParams(batch[0])); err != nil || len(rows) != 0 {
		t.Fatalf("ack with the previous lease's token: %d rows, %v; want none", len(rows), err)
	}
	forged := ackParams(batch[1])
	forged.Tokens = [][]byte{batch[2].LeaseToken}
	if rows, err := f.q.MessageAckByReceipt(ctx, forged); err != nil || len(rows) != 0 {
		t.Fatalf("ack of message %d with its sibling's token: %d rows, %v; want none", batch[1].Sequence, len(rows), err)
	}
	for _, m := range append(append(batch[1:], single...), again...) {
		if rows, err := f.q.MessageAckByReceipt(ctx, ackParams(m)); err != nil || len(rows) != 1 {
			t.Fatalf("ack of message %d: %d rows, %v; want 1", m.Sequence, len(rows), err)
		}
	}
}

// A FIFO queue's claim (skipq.message_claim_grouped) derives its tokens as
// the standard claim does: a message of a claim of several gets a token of
// its own, which settles nothing on its sibling's key, and a new lease of
// a message makes its old token stale.
func TestGroupedClaimTokensAreTheMessagesOwn(t *testing.T) {
	f := setupFIFO(t)
	ctx := context.Background()
	sendGrouped(t, f.q, []string{"g1", "g2", "g3", "h1", "i1"}, []string{"G", "G", "G", "H", "I"})
	batch := claimGrouped(t, f.q, 4, 3)
	single := claimGrouped(t, f.q, 1, 1)
	if len(batch) != 4 || len(single) != 1 || *single[0].GroupID != "I" {
		t.Fatalf("claimed %d and %+v, want 4 (G's three and H's) and I's one", len(batch), single)
	}
	all := append(append([]db.SkipqMessage{}, batch...), single...)
	tokensOfTheirOwn(t, all)
	forged := ackParams(batch[1])
	forged.Tokens = [][]byte{batch[2].LeaseToken}
	if rows, err := f.q.MessageAckByReceipt(ctx, forged); err != nil || len(rows) != 0 {
		t.Fatalf("ack of %s with its sibling's token: %d rows, %v; want none", batch[1].MessageID, len(rows), err)
	}
	// The nack of I's only message frees I: its next claim leases the
	// message anew, with another token.
	if _, err := f.q.MessageNack(ctx, db.MessageNackParams{QueueIds: []int64{single[0].QueueID},
		Sequences: []int64{single[0].Sequence}, Tokens: [][]byte{single[0].LeaseToken}, ServerMaxReceiveCount: 10}); err != nil {
		t.Fatal(err)
	}
	again := claimGrouped(t, f.q, 1, 1)
	if len(again) != 1 || again[0].Sequence != single[0].Sequence || bytes.Equal(again[0].LeaseToken, single[0].LeaseToken) {
		t.Fatalf("the claim after the nack: %+v, want %s with a new token", again, single[0].MessageID)
	}
	if rows, err := f.q.MessageAckByReceipt(ctx, ackParams(single[0])); err != nil || len(rows) != 0 {
		t.Fatalf("ack with the previous lease's token: %d rows, %v; want none", len(rows), err)
	}
	for _, m := range append(batch, again...) {
		if rows, err := f.q.MessageAckByReceipt(ctx, ackParams(m)); err != nil || len(rows) != 1 {
			t.Fatalf("ack of %s: %d rows, %v; want 1", m.MessageID, len(rows), err)
		}
	}
}

// tokensOfTheirOwn fails unless each message's lease token has 32 bytes,
// as a drawn one has, and no two messages share one.
func tokensOfTheirOwn(t *testing.T, msgs []db.SkipqMessage) {
	t.Helper()
	for i, m := range msgs {
		if len(m.LeaseToken) != 32 {
			t.Fatalf("message %d: token of %d bytes, want 32", m.Sequence, len(m.LeaseToken))
		}
		for _, o := range msgs[:i] {
			if bytes.Equal(m.LeaseToken, o.LeaseToken) {
				t.Fatalf("messages %d and %d got one token", o.Sequence, m.Sequence)
			}
		}
	}
}
