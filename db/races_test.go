package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/skipq/skipq/db"
)

// A nack of a last allowed delivery racing the worker that dead-letters the
// same message when its lease ran out: the worker locks the message first,
// the nack waits for it, then finds the message gone and settles nothing.
// The message is in the dead-letter queue exactly once, never in both
// queues, never in neither.
func TestNackRacingWorkerDeadLetterMovesOnce(t *testing.T) {
	f := setup(t, 1)
	ctx := context.Background()
	if _, err := f.pool.Exec(ctx, `UPDATE skipq.messages SET max_receive_count = 1, dead_letter_queue = 'q.dlq'`); err != nil {
		t.Fatal(err)
	}
	if err := f.q.QueueCreateMissing(ctx, db.QueueCreateMissingParams{Tenant: "t", Names: []string{"q.dlq"}}); err != nil {
		t.Fatal(err)
	}
	m := claim(t, f.q, 1, nil)[0]
	later := time.Now().Add(time.Hour) // the lease has run out

	// The worker: takes the timer, locks the message, moves it -- and has
	// not committed yet.
	txW, qw := f.begin(t)
	timers, err := qw.TimerTakeDue(ctx, db.TimerTakeDueParams{Now: &later, MaxTimers: 10})
	if err != nil || len(timers) != 1 {
		t.Fatalf("timers: %v %v", timers, err)
	}
	due, err := qw.MessageLockDue(ctx, db.MessageLockDueParams{QueueIds: []int64{m.QueueID}, Sequences: []int64{m.Sequence}, Now: &later})
	if err != nil || len(due) != 1 || !due[0].Exhausted {
		t.Fatalf("due: %v %v", due, err)
	}
	moved, err := qw.MessageDeadLetter(ctx, db.MessageDeadLetterParams{QueueIds: []int64{m.QueueID}, Sequences: []int64{m.Sequence},
		Now: &later, ServerMaxReceiveCount: 10})
	if err != nil || len(moved) != 1 || moved[0].DeadLetterQueueID == nil {
		t.Fatalf("move: %v %v", moved, err)
	}

	// The nack of the same delivery, in its own transaction, waits.
	final := make(chan int, 1)
	go func() {
		rows, err := f.q.MessageNack(ctx, db.MessageNackParams{
			QueueIds: []int64{m.QueueID}, Sequences: []int64{m.Sequence}, Tokens: [][]byte{m.LeaseToken},
			ServerMaxReceiveCount: 10})
		if err != nil {
			t.Error(err)
		}
		final <- len(rows)
	}()
	waitForLockWait(t, f.pool)
	if err := txW.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := <-final; n != 0 {
		t.Fatalf("the nack settled %d deliveries after the worker moved the message", n)
	}
	var inSource, inDLQ int
	err = f.pool.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE q.name = 'q'), count(*) FILTER (WHERE q.name = 'q.dlq')
		FROM skipq.messages m JOIN skipq.queues q ON q.id = m.queue_id`).Scan(&inSource, &inDLQ)
	if err != nil || inSource != 0 || inDLQ != 1 {
		t.Fatalf("source holds %d, dead-letter queue %d (%v); want 0 and 1", inSource, inDLQ, err)
	}
}

// Two senders of the same new idempotency key: the second waits for the
// first's transaction (skipq.message_insert serializes senders of a key),
// then finds its key and answers as its duplicate, with its send. Neither
// stores a second copy.
func TestSameMessageIDSentTwiceAtOnceStoresOne(t *testing.T) {
	f := setup(t, 0)
	ctx := context.Background()
	keyed := func() db.MessageInsertParams {
		p := sendParams("q", 0, "order-7")
		p.Keyed[0] = true
		return p
	}
	txA, qa := f.begin(t)
	rows, err := qa.MessageInsert(ctx, keyed())
	if err != nil || len(rows) != 1 || rows[0].Outcome != db.OutcomeSent {
		t.Fatalf("A's send: %+v %v", rows, err)
	}
	second := make(chan []db.MessageInsertRow, 1)
	go func() {
		rows, err := f.q.MessageInsert(ctx, keyed())
		if err != nil {
			t.Error(err)
		}
		second <- rows
	}()
	waitForLockWait(t, f.pool)
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := <-second
	if len(got) != 1 || got[0].Outcome != db.OutcomeDuplicate || *got[0].Sequence != *rows[0].Sequence {
		t.Fatalf("the second send got %+v, want a duplicate of sequence %d", got, *rows[0].Sequence)
	}
	var copies int
	if err := f.pool.QueryRow(ctx, "SELECT count(*) FROM skipq.messages WHERE message_id = 'order-7'").Scan(&copies); err != nil || copies != 1 {
		t.Fatalf("%d copies stored (%v)", copies, err)
	}
}
