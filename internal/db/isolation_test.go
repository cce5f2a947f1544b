package db_test

// Concurrency specs in the style of pgmq's isolation tests: two connections
// run the real statements in an explicit interleaving, with transactions
// held open where the interesting lock is.

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/testdb"
)

type fixture struct {
	pool *pgxpool.Pool
	q    *db.Queries
}

func setup(t *testing.T, messages int) fixture {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	q := db.New(pool)
	if err := q.QueueCreateMissing(ctx, db.QueueCreateMissingParams{Tenant: "t", Names: []string{"q"}}); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, messages)
	for i := range ids {
		ids[i] = string(rune('a' + i))
	}
	p := sendParams("q", 0, ids...)
	if rows, err := q.MessageInsert(ctx, p); err != nil || len(rows) != messages {
		t.Fatalf("send: %v (%d rows)", err, len(rows))
	}
	return fixture{pool: pool, q: q}
}

// sendParams sends one-byte messages with the given ids to queue (tenant
// "t"), delayed by delay seconds.
func sendParams(queue string, delay int32, ids ...string) db.MessageInsertParams {
	p := db.MessageInsertParams{Tenant: "t", Queue: queue, ServerMaxReceiveCount: 10}
	for _, id := range ids {
		p.MessageIds = append(p.MessageIds, id)
		p.Keyed = append(p.Keyed, false)
		p.ClientIds = append(p.ClientIds, "")
		p.Metadatas = append(p.Metadatas, "")
		p.BodyOffsets = append(p.BodyOffsets, int32(len(p.BodyData)+1))
		p.BodyLengths = append(p.BodyLengths, 1)
		p.BodyData = append(p.BodyData, 'x')
		p.BodyBinaries = append(p.BodyBinaries, false)
		p.Tags = append(p.Tags, "{}")
		p.DelaySeconds = append(p.DelaySeconds, delay)
		p.ExpirationSeconds = append(p.ExpirationSeconds, 0)
		p.MaxReceiveCounts = append(p.MaxReceiveCounts, 0)
		p.DeadLetterQueues = append(p.DeadLetterQueues, "")
		p.DeadLetterQueueGiven = append(p.DeadLetterQueueGiven, false)
	}
	return p
}

func (f fixture) begin(t *testing.T) (pgx.Tx, *db.Queries) {
	t.Helper()
	tx, err := f.pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx, f.q.WithTx(tx)
}

func claim(t *testing.T, q *db.Queries, max int32, now *time.Time) []db.SkipqMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := q.MessageClaim(ctx, db.MessageClaimParams{Tenant: "t", Queue: "q", MaxMessages: max, Now: now,
		MaxResponseBytes: 1 << 30, Mode: "claim"}) // no budget cut: these specs are about locks
	if err != nil {
		t.Fatalf("claim (a timeout here means it blocked): %v", err)
	}
	return rows
}

func ackParams(m db.SkipqMessage) db.MessageAckByReceiptParams {
	return db.MessageAckByReceiptParams{QueueIds: []int64{m.QueueID}, Sequences: []int64{m.Sequence}, Tokens: [][]byte{m.LeaseToken}}
}

// A claim whose transaction is still open holds its rows; a second claim
// skips them without waiting and takes the next message.
func TestClaimSkipsRowsLockedByAnotherClaim(t *testing.T) {
	f := setup(t, 2)
	_, qa := f.begin(t)
	a := claim(t, qa, 1, nil)
	b := claim(t, f.q, 1, nil)
	if len(a) != 1 || len(b) != 1 || a[0].Sequence == b[0].Sequence {
		t.Fatalf("A claimed %v, B claimed %v: want two different messages", a, b)
	}
	if c := claim(t, f.q, 1, nil); len(c) != 0 {
		t.Fatalf("a third claim got %v while A holds the only other message", c)
	}
}

// A claim whose snapshot predates another claim's commit still sees the
// message that claim took as ready. It must skip it without locking it:
// a lock left on it (a row locked, then found changed) would hold up the
// other consumer's ack until this claim commits, a Lock:transactionid
// wait between claims and acks of different deliveries. The claim is made
// to take its snapshot first and run after the other claim committed by
// queueing it, behind a LOCK TABLE, for the timers table it writes.
func TestClaimLeavesNoLockOnAMessageClaimedUnderIt(t *testing.T) {
	f := setup(t, 2)
	ctx := context.Background()
	if err := f.q.QueueCreateMissing(ctx, db.QueueCreateMissingParams{Tenant: "t", Names: []string{"empty"}}); err != nil {
		t.Fatal(err)
	}
	connA, err := f.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer connA.Release()
	// Plan the claim on A's connection first: a first call would queue for
	// the lock while planning, before its snapshot.
	if _, err := db.New(connA).MessageClaim(ctx, db.MessageClaimParams{Tenant: "t", Queue: "empty", MaxMessages: 1,
		MaxResponseBytes: 1 << 30, Mode: "claim"}); err != nil {
		t.Fatal(err)
	}

	txB, qb := f.begin(t)
	taken := claim(t, qb, 1, nil)
	txLock, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = txLock.Rollback(ctx) }()
	locked := make(chan error, 1)
	go func() {
		_, err := txLock.Exec(ctx, "ALTER INDEX skipq.messages_queue_sent_idx SET TABLESPACE pg_default")
		locked <- err
	}()
	waitForLockWait(t, f.pool)
	txA, err := connA.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = txA.Rollback(ctx) }()
	type claimed struct {
		rows []db.SkipqMessage
		err  error
	}
	claimedA := make(chan claimed, 1)
	go func() {
		rows, err := db.New(txA).MessageClaim(ctx, db.MessageClaimParams{Tenant: "t", Queue: "q", MaxMessages: 2,
			MaxResponseBytes: 1 << 30, Mode: "claim"})
		claimedA <- claimed{rows, err}
	}()
	waitForLockWaits(t, f.pool, 2)
	if err := txB.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	if err := txLock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-claimedA
	if a.err != nil || len(a.rows) != 1 || a.rows[0].Sequence == taken[0].Sequence {
		t.Fatalf("A claimed %v (%v) after B took %d: want the other message", a.rows, a.err, taken[0].Sequence)
	}
	ackCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if rows, err := f.q.MessageAckByReceipt(ackCtx, ackParams(taken[0])); err != nil || len(rows) != 1 {
		t.Fatalf("B's ack while A is open (a timeout means it waited for A): %v %v", rows, err)
	}
}

// An ack with the handle of a lease that expired and was re-claimed (by a
// claim not yet committed) waits for that claim, then settles nothing.
func TestAckRacingReclaimAfterLeaseExpiry(t *testing.T) {
	f := setup(t, 1)
	first := claim(t, f.q, 1, nil)[0]
	later := time.Now().Add(time.Hour) // the first lease (60 s) has expired
	readyAgain(t, f.q, later)
	txB, qb := f.begin(t)
	second := claim(t, qb, 1, &later)
	if len(second) != 1 {
		t.Fatalf("re-claim after expiry got %v", second)
	}
	acked := make(chan int, 1)
	go func() {
		rows, err := f.q.MessageAckByReceipt(context.Background(), ackParams(first))
		if err != nil {
			t.Error(err)
		}
		acked <- len(rows)
	}()
	waitForLockWait(t, f.pool)
	select {
	case n := <-acked:
		t.Fatalf("the stale ack finished (%d rows) while the re-claim held the row", n)
	default:
	}
	if err := txB.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := <-acked; n != 0 {
		t.Fatalf("the first delivery's handle acked %d rows after the re-claim", n)
	}
	if rows, err := f.q.MessageAckByReceipt(context.Background(), ackParams(second[0])); err != nil || len(rows) != 1 {
		t.Fatalf("the live handle did not ack: %v %v", rows, err)
	}
}

// Ack and nack of the same handle at once: exactly one settles.
func TestAckAndNackOfOneHandleSettleOnce(t *testing.T) {
	f := setup(t, 1)
	m := claim(t, f.q, 1, nil)[0]
	txA, qa := f.begin(t)
	acked, err := qa.MessageAckByReceipt(context.Background(), ackParams(m))
	if err != nil || len(acked) != 1 {
		t.Fatalf("ack: %v %v", acked, err)
	}
	nacked := make(chan int, 1)
	go func() {
		rows, err := f.q.MessageNack(context.Background(), db.MessageNackParams{
			QueueIds: []int64{m.QueueID}, Sequences: []int64{m.Sequence}, Tokens: [][]byte{m.LeaseToken},
			ServerMaxReceiveCount: 10})
		if err != nil {
			t.Error(err)
		}
		nacked <- len(rows)
	}()
	waitForLockWait(t, f.pool)
	if err := txA.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := <-nacked; n != 0 {
		t.Fatalf("nack settled %d rows after the ack committed", n)
	}
}

// Two workers firing due timers take disjoint batches: two claims of two,
// two timer sets, and the second worker passes over the set the first
// holds.
func TestTimerBatchesAreDisjoint(t *testing.T) {
	f := setup(t, 4)
	ctx := context.Background()
	for range 2 {
		if claimed := claim(t, f.q, 2, nil); len(claimed) != 2 {
			t.Fatalf("claimed %v", claimed)
		}
	}
	later := time.Now().Add(time.Hour)
	_, qa := f.begin(t)
	a, err := qa.TimerTakeDue(ctx, db.TimerTakeDueParams{Now: &later, MaxTimers: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, qb := f.begin(t)
	b, err := qb.TimerTakeDue(ctx, db.TimerTakeDueParams{Now: &later, MaxTimers: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 2 || len(b) != 2 {
		t.Fatalf("worker A took %d timers, worker B took %d; want 2 and 2", len(a), len(b))
	}
	for _, x := range a {
		for _, y := range b {
			if x.Sequence == y.Sequence {
				t.Fatalf("both workers took the timer of message %d", x.Sequence)
			}
		}
	}
}

// readyAgain fires every timer due at `at` and readies the messages whose
// lease or delay ended, as the worker's FireTimers job (internal/worker) does
// (a last allowed delivery stays locked and in place: the worker would
// dead-letter it).
func readyAgain(t *testing.T, q *db.Queries, at time.Time) {
	t.Helper()
	ctx := context.Background()
	timers, err := q.TimerTakeDue(ctx, db.TimerTakeDueParams{Now: &at, MaxTimers: 1000})
	if err != nil {
		t.Fatal(err)
	}
	fire := db.MessageFireParams{Now: &at, RetrySeconds: 1}
	for _, tm := range timers {
		fire.QueueIds = append(fire.QueueIds, tm.QueueID)
		fire.Sequences = append(fire.Sequences, tm.Sequence)
	}
	if _, err := q.MessageFire(ctx, fire); err != nil {
		t.Fatal(err)
	}
}

// waitForLockWait waits until some backend of this database is blocked on a
// lock: the interleaving's second statement has reached the first's lock.
func waitForLockWait(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	waitForLockWaits(t, pool, 1)
}

// waitForLockWaits waits until n statements of the test's database wait
// for a lock.
func waitForLockWaits(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the second statement never waited on the first one's lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
