package db_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/testdb"
)

// AckThenClaim is one transaction: when the claim fails, the ack before it
// is undone too; when both run, the ack's message is gone and the claim
// got the next one.
func TestAckThenClaimIsOneTransaction(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for _, body := range []string{"a", "b"} {
		if _, err := pool.Exec(ctx, "SELECT skipq.send('atc', $1::bytea)", []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, "SELECT count(*) FROM skipq.receive('atc', visibility_seconds => 60)"); err != nil {
		t.Fatal(err)
	}
	var queueID, sequence int64
	var token []byte
	if err := pool.QueryRow(ctx, "SELECT queue_id, sequence, lease_token FROM skipq.messages WHERE receive_count = 1").
		Scan(&queueID, &sequence, &token); err != nil {
		t.Fatal(err)
	}
	ack := db.MessageAckByReceiptParams{QueueIds: []int64{queueID}, Sequences: []int64{sequence}, Tokens: [][]byte{token}, KeyIds: []int64{0}}
	claim := db.MessageClaimParams{Tenant: "default", Queue: "atc", MaxMessages: 1, MaxPerGroup: 1,
		MaxResponseBytes: 1 << 20, MessageOverhead: 700, Mode: "claim"}
	count := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM skipq.messages").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	bad := claim
	bad.MaxMessages = -1 // LIMIT -1: the claim fails
	if _, _, err := db.AckThenClaim(ctx, pool, "", ack, bad); err == nil {
		t.Fatal("a claim of -1 messages did not fail")
	}
	if n := count(); n != 2 {
		t.Fatalf("%d messages after a failed claim, want 2: the ack before it must be undone", n)
	}

	acked, claimed, err := db.AckThenClaim(ctx, pool, db.AckThenClaimSetup(true, db.CommitAsync), ack, claim)
	if err != nil {
		t.Fatal(err)
	}
	if len(acked) != 1 || acked[0].Sequence != sequence || len(claimed) != 1 || claimed[0].Sequence == sequence {
		t.Fatalf("acked %+v, claimed %d (sequence %d acked)", acked, len(claimed), sequence)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d messages, want 1", n)
	}
}
