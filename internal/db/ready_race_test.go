package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/db"
)

// An ack of a delivery whose lease ran out, racing the worker that readies
// the message: the ack waits for the worker's lock, then deletes the
// message (its handle still holds the lease), but its lookup of the
// message's ready row reads its snapshot, which predates the worker's row.
// The worker's sweep (ReadyStaleRemove) removes such a row, and leaves the
// live ready rows of the queue alone.
func TestAckRacingWorkerReadyLeavesNoReadyRow(t *testing.T) {
	f := setup(t, 1)
	ctx := context.Background()
	m := claim(t, f.q, 1, nil)[0]
	later := time.Now().Add(time.Hour) // the lease has run out

	txW, qw := f.begin(t)
	due, err := qw.MessageFire(ctx, db.MessageFireParams{QueueIds: []int64{m.QueueID}, Sequences: []int64{m.Sequence}, Now: &later, RetrySeconds: 1})
	if err != nil || len(due) != 1 || due[0].Exhausted {
		t.Fatalf("due: %v %v", due, err)
	}

	acked := make(chan int, 1)
	go func() {
		rows, err := f.q.MessageAckByReceipt(ctx, db.MessageAckByReceiptParams{
			QueueIds: []int64{m.QueueID}, Sequences: []int64{m.Sequence}, Tokens: [][]byte{m.LeaseToken}, KeyIds: []int64{0}})
		if err != nil {
			t.Error(err)
		}
		acked <- len(rows)
	}()
	waitForLockWait(t, f.pool)
	if err := txW.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := <-acked; n != 1 {
		t.Fatalf("the ack settled %d deliveries, want 1 (a readied message's handle still holds it)", n)
	}
	counts := func() (messages, ready int) {
		t.Helper()
		err := f.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM skipq.messages), (SELECT count(*) FROM skipq.ready)`).
			Scan(&messages, &ready)
		if err != nil {
			t.Fatal(err)
		}
		return messages, ready
	}
	if messages, ready := counts(); messages != 0 || ready != 1 {
		t.Fatalf("%d messages and %d ready rows after the race; the race leaves 0 and 1", messages, ready)
	}
	// A live message of the queue, ready, and one in flight.
	if _, err := f.q.MessageInsert(ctx, sendParams("q", 0, "live-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.q.MessageInsert(ctx, sendParams("q", 0, "live-2")); err != nil {
		t.Fatal(err)
	}
	claim(t, f.q, 1, nil)
	removed, err := f.q.ReadyStaleRemove(ctx, 16)
	if err != nil || removed != 1 {
		t.Fatalf("removed %d stale ready rows (%v), want 1", removed, err)
	}
	if messages, ready := counts(); messages != 2 || ready != 1 {
		t.Fatalf("%d messages and %d ready rows after the sweep; want 2 and 1 (the live ready message's)", messages, ready)
	}
}

// The same race with an extension: the extended message is in flight again
// (not ready) and keeps the worker's ready row until the sweep, which
// removes the row and leaves the message.
func TestExtendRacingWorkerReadyIsSwept(t *testing.T) {
	f := setup(t, 1)
	ctx := context.Background()
	m := claim(t, f.q, 1, nil)[0]
	later := time.Now().Add(time.Hour)

	txW, qw := f.begin(t)
	if _, err := qw.MessageFire(ctx, db.MessageFireParams{QueueIds: []int64{m.QueueID}, Sequences: []int64{m.Sequence}, Now: &later, RetrySeconds: 1}); err != nil {
		t.Fatal(err)
	}
	extended := make(chan int, 1)
	go func() {
		rows, err := f.q.MessageSetVisibilityByReceipt(ctx, db.MessageSetVisibilityByReceiptParams{
			QueueIds: []int64{m.QueueID}, Sequences: []int64{m.Sequence}, Tokens: [][]byte{m.LeaseToken},
			VisibilitySeconds: []int32{60}, KeyIds: []int64{0}})
		if err != nil {
			t.Error(err)
		}
		extended <- len(rows)
	}()
	waitForLockWait(t, f.pool)
	if err := txW.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := <-extended; n != 1 {
		t.Fatalf("the extension settled %d deliveries, want 1", n)
	}
	if removed, err := f.q.ReadyStaleRemove(ctx, 16); err != nil || removed != 1 {
		t.Fatalf("removed %d stale ready rows (%v), want 1", removed, err)
	}
	var ready int
	var flagged bool
	err := f.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM skipq.ready), (SELECT ready FROM skipq.messages)`).Scan(&ready, &flagged)
	if err != nil || ready != 0 || flagged {
		t.Fatalf("%d ready rows, message ready %v (%v); want 0, false", ready, flagged, err)
	}
}
