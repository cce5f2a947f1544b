package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/db"
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
	due, err := qw.MessageFire(ctx, db.MessageFireParams{QueueIds: []int64{m.QueueID}, Sequences: []int64{m.Sequence}, Now: &later, RetrySeconds: 1})
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

// An ack and a requeue of one delivery, each in its own transaction, in
// both orders: the second waits for the first's row lock, then finds the
// delivery gone and changes nothing. The message ends settled once: gone
// after an ack, in the destination once after a requeue.
func TestRequeueRacingAckSettlesOnce(t *testing.T) {
	ctx := context.Background()
	for _, ackFirst := range []bool{true, false} {
		f := setup(t, 1)
		m := claim(t, f.q, 1, nil)[0]
		ack := func(q *db.Queries) (int, error) {
			rows, err := q.MessageAckByReceipt(ctx, ackParams(m))
			return len(rows), err
		}
		requeue := func(q *db.Queries) (int, error) {
			rows, err := q.MessageRequeue(ctx, db.MessageRequeueParams{QueueIds: []int64{m.QueueID},
				Sequences: []int64{m.Sequence}, Tokens: [][]byte{m.LeaseToken}, ToQueue: "elsewhere", ServerMaxReceiveCount: 10})
			return len(rows), err
		}
		first, second := requeue, ack
		if ackFirst {
			first, second = ack, requeue
		}
		txA, qa := f.begin(t)
		if n, err := first(qa); err != nil || n != 1 {
			t.Fatalf("ack first %v: the first settle changed %d (%v)", ackFirst, n, err)
		}
		done := make(chan int, 1)
		go func() {
			n, err := second(f.q)
			if err != nil {
				t.Error(err)
			}
			done <- n
		}()
		waitForLockWait(t, f.pool)
		if err := txA.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if n := <-done; n != 0 {
			t.Fatalf("ack first %v: the second settle changed %d deliveries after the first committed", ackFirst, n)
		}
		var inQ, moved int
		err := f.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE q.name = 'q'), count(*) FILTER (WHERE q.name = 'elsewhere')
			FROM skipq.messages m JOIN skipq.queues q ON q.id = m.queue_id`).Scan(&inQ, &moved)
		want := 1
		if ackFirst {
			want = 0
		}
		if err != nil || inQ != 0 || moved != want {
			t.Fatalf("ack first %v: %d left in the source, %d in the destination (%v); want 0 and %d", ackFirst, inQ, moved, err, want)
		}
	}
}

// A bulk redrive racing a receive in the dead-letter queue: the redrive
// skips the message the open claim holds (SKIP LOCKED) and moves nothing;
// once the claim committed, a redrive moves the message although it is in
// flight, and the claim's handle is stale. The message is in exactly one
// queue throughout.
func TestRedriveRacingReceiveInDeadLetterQueue(t *testing.T) {
	ctx := context.Background()
	f := setup(t, 0)
	if _, err := f.pool.Exec(ctx, `UPDATE skipq.queues SET max_receive_count = 1, dead_letter_queue = 'q.dlq' WHERE name = 'q'`); err != nil {
		t.Fatal(err)
	}
	if _, err := f.q.MessageInsert(ctx, sendParams("q", 0, "m1")); err != nil {
		t.Fatal(err)
	}
	m := claim(t, f.q, 1, nil)[0]
	nacked, err := f.q.MessageNack(ctx, db.MessageNackParams{QueueIds: []int64{m.QueueID}, Sequences: []int64{m.Sequence},
		Tokens: [][]byte{m.LeaseToken}, ServerMaxReceiveCount: 10})
	if err != nil || len(nacked) != 1 || nacked[0].MovedTo == nil {
		t.Fatalf("the nack of the last delivery: %+v %v", nacked, err)
	}
	dlq := *nacked[0].MovedTo
	copies := func() int {
		var n int
		// A redrive gives the message a new server id: count every row.
		if err := f.pool.QueryRow(ctx, "SELECT count(*) FROM skipq.messages").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	redrive := func() int {
		tx, q := f.begin(t)
		picked, err := q.MessageDeadLetteredPick(ctx, db.MessageDeadLetteredPickParams{QueueID: dlq, MaxMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		for _, p := range picked {
			seqs = append(seqs, p.Sequence)
		}
		moved, err := q.MessageRedrive(ctx, db.MessageRedriveParams{QueueID: dlq, Sequences: seqs, ServerMaxReceiveCount: 10})
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return len(moved)
	}

	txA, qa := f.begin(t)
	claimed, err := qa.MessageClaim(ctx, db.MessageClaimParams{Tenant: "t", Queue: "q.dlq", MaxMessages: 1, MaxResponseBytes: 1 << 30, Mode: "claim"})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim in the dead-letter queue: %v %v", claimed, err)
	}
	if n := redrive(); n != 0 {
		t.Fatalf("the redrive moved %d messages an open claim holds", n)
	}
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if c := copies(); c != 1 {
		t.Fatalf("%d copies after the skipped redrive", c)
	}
	if n := redrive(); n != 1 {
		t.Fatalf("the redrive after the claim committed moved %d messages, want the one in flight", n)
	}
	if rows, err := f.q.MessageAckByReceipt(ctx, ackParams(claimed[0])); err != nil || len(rows) != 0 {
		t.Fatalf("the redriven message's old handle settled %d (%v)", len(rows), err)
	}
	if c := copies(); c != 1 {
		t.Fatalf("%d copies after the redrive", c)
	}
}
