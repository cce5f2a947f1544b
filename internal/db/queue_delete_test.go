package db_test

import (
	"context"
	"testing"

	"github.com/skipq/skipq/internal/db"
)

// A send whose transaction is still open when its queue is deleted commits a
// message the delete never saw (no foreign key, by design). That message must
// be unreachable at once -- its handle settles nothing -- and the worker's
// sweep must remove it.
func TestSendRacingQueueDeleteLeavesNothingReachable(t *testing.T) {
	f := setup(t, 0)
	ctx := context.Background()

	// A: a send into q and a claim of it, in one transaction still open.
	txA, qa := f.begin(t)
	p := sendParams("q", 0, "late")
	if rows, err := qa.MessageInsert(ctx, p); err != nil || len(rows) != 1 {
		t.Fatalf("send: %v %v", rows, err)
	}
	claimed := claim(t, qa, 1, nil)
	if len(claimed) != 1 {
		t.Fatalf("A's claim of its own send got %v", claimed)
	}

	// B: the queue's deletion runs and commits meanwhile, without waiting
	// for A (it cannot see A's row).
	txB, qb := f.begin(t)
	id, err := qb.QueueDelete(ctx, db.QueueDeleteParams{Tenant: "t", Name: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := qb.MessageDeleteByQueue(ctx, db.MessageDeleteByQueueParams{QueueID: id}); err != nil || n != 0 {
		t.Fatalf("B deleted %d messages (%v); it should not see A's", n, err)
	}
	if err := txB.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	var orphans int
	if err := f.pool.QueryRow(ctx, "SELECT count(*) FROM skipq.messages WHERE queue_id = $1", id).Scan(&orphans); err != nil || orphans != 1 {
		t.Fatalf("the interleaving left %d messages in the deleted queue (%v); want the 1 this test is about", orphans, err)
	}
	// Every settle of its live handle is stale.
	m := claimed[0]
	keys := func() ([]int64, []int64, [][]byte) {
		return []int64{m.QueueID}, []int64{m.Sequence}, [][]byte{m.LeaseToken}
	}
	qs, ss, ts := keys()
	if rows, err := f.q.MessageSetVisibilityByReceipt(ctx, db.MessageSetVisibilityByReceiptParams{QueueIds: qs, Sequences: ss, Tokens: ts, VisibilitySeconds: []int32{5}}); err != nil || len(rows) != 0 {
		t.Fatalf("visibility of a deleted queue's message: %v %v", rows, err)
	}
	if rows, err := f.q.MessageNack(ctx, db.MessageNackParams{QueueIds: qs, Sequences: ss, Tokens: ts, ServerMaxReceiveCount: 10}); err != nil || len(rows) != 0 {
		t.Fatalf("nack of a deleted queue's message: %v %v", rows, err)
	}
	if rows, err := f.q.MessageRequeue(ctx, db.MessageRequeueParams{QueueIds: qs, Sequences: ss, Tokens: ts, ToQueue: "elsewhere", ServerMaxReceiveCount: 10}); err != nil || len(rows) != 0 {
		t.Fatalf("requeue of a deleted queue's message: %v %v", rows, err)
	}
	if rows, err := f.q.MessageAckByReceipt(ctx, ackParams(m)); err != nil || len(rows) != 0 {
		t.Fatalf("ack of a deleted queue's message: %v %v", rows, err)
	}

	// A queue of the same name is a new queue: it does not see the orphan.
	if err := f.q.QueueCreateMissing(ctx, db.QueueCreateMissingParams{Tenant: "t", Names: []string{"q"}}); err != nil {
		t.Fatal(err)
	}
	later := m.VisibleAt.Add(1)
	if got := claim(t, f.q, 10, &later); len(got) != 0 {
		t.Fatalf("the re-created queue delivered the old queue's message: %v", got)
	}

	// The sweep removes it, and only it.
	if _, err := f.q.MessageInsert(ctx, sendParams("q", 0, "kept")); err != nil {
		t.Fatal(err)
	}
	swept, err := f.q.MessageDeleteOrphaned(ctx, 100)
	if err != nil || len(swept) != 1 || swept[0] != id {
		t.Fatalf("sweep removed %v (%v); want the one message of queue %d", swept, err, id)
	}
	var left int
	if err := f.pool.QueryRow(ctx, "SELECT count(*) FROM skipq.messages").Scan(&left); err != nil || left != 1 {
		t.Fatalf("%d messages left after the sweep (%v); want the re-created queue's one", left, err)
	}
}
