package db_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/testdb"
)

// backlog adds n messages in flight to the queue "drained", without an
// analyze: what the settles' plans, made on drained statistics, must not
// walk.
func backlog(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		INSERT INTO skipq.messages (queue_id, message_id, sent_at, visible_at, max_receive_count, lease_token, receive_count)
		SELECT q.id, 'backlog-' || g, now(), now() + interval '1 hour', 10, uuid_send(gen_random_uuid()), 1
		FROM skipq.queues q, generate_series(1, $1::integer) g WHERE q.name = 'drained'`, n)
	if err != nil {
		t.Fatal(err)
	}
}

// settleBuffersBound is what a settle of settleHandles may read: a few
// buffers a handle (probe, row, index entries, ready row), the queue's
// row and the function's own catalog lookups; a walk of the backlog
// behind it reads thousands.
const (
	settleHandles      = 5
	settleBacklog      = 5000
	settleBuffersBound = 60 * settleHandles
)

// The settle statements' generic plans are made at a connection's first
// call and kept for its life. Made on a drained table's statistics, a
// join of the handles to the messages by key walked the whole primary key
// per call (an ack of 100 read 57,521 buffers behind 28,000 messages).
// Each settle of a few handles (ack, extend, nack, requeue), planned on such
// statistics, must read a few buffers a handle however many messages sit
// behind them.
func TestSettlesPlannedOnADrainedTableProbeEachHandle(t *testing.T) {
	settles := []struct {
		name string
		sql  string
		args func(q []int64, s []int64, tok [][]byte) []any
	}{
		{"ack", `SELECT * FROM skipq.message_ack($1, $2, $3)`,
			func(q, s []int64, tok [][]byte) []any { return []any{q, s, tok} }},
		{"extend", `SELECT * FROM skipq.message_set_visibility(NULL, $1, $2, $3, $4)`,
			func(q, s []int64, tok [][]byte) []any { return []any{q, s, tok, repeated(int32(600), len(q))} }},
		{"nack", `SELECT * FROM skipq.message_nack(NULL, $1, $2, $3, $4, 10)`,
			func(q, s []int64, tok [][]byte) []any { return []any{q, s, tok, repeated("", len(q))} }},
		{"requeue", `SELECT * FROM skipq.message_requeue(NULL, $1, $2, $3, 'elsewhere', 10)`,
			func(q, s []int64, tok [][]byte) []any { return []any{q, s, tok} }},
	}
	for _, settle := range settles {
		t.Run(settle.name, func(t *testing.T) {
			f := setup(t, 0)
			ctx := context.Background()
			testdb.DrainedStatistics(t, f.pool)
			conn, err := f.pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			// The first call plans, on the drained statistics.
			if _, err := conn.Exec(ctx, settle.sql, settle.args([]int64{1}, []int64{0}, [][]byte{{0}})...); err != nil {
				t.Fatal(err)
			}
			backlog(t, f.pool, settleBacklog)
			ids := make([]string, settleHandles)
			for i := range ids {
				ids[i] = string(rune('a' + i))
			}
			if _, err := f.q.MessageInsert(ctx, sendParams("q", 0, ids...)); err != nil {
				t.Fatal(err)
			}
			claimed := claim(t, f.q, settleHandles, nil)
			if len(claimed) != settleHandles {
				t.Fatalf("claimed %d messages, want %d", len(claimed), settleHandles)
			}
			var q, s []int64
			var tok [][]byte
			for _, m := range claimed {
				q, s, tok = append(q, m.QueueID), append(s, m.Sequence), append(tok, m.LeaseToken)
			}
			buffers := testdb.ExplainedBuffers(t, conn, settle.sql, settle.args(q, s, tok)...)
			if buffers > settleBuffersBound {
				t.Fatalf("%s of %d handles read %d buffers behind %d messages, want at most %d: its plan walks the table",
					settle.name, settleHandles, buffers, settleBacklog, settleBuffersBound)
			}
			t.Logf("%s of %d handles: %d buffers", settle.name, settleHandles, buffers)
		})
	}
}

// An ack that waits behind an uncommitted extension of the same delivery
// (which keeps the token) acks the message's newest version once the
// extension commits: the row's address changed, the handle still holds it.
func TestAckWaitingForAnExtendAcksTheNewestVersion(t *testing.T) {
	f := setup(t, 1)
	ctx := context.Background()
	m := claim(t, f.q, 1, nil)[0]
	txE, qe := f.begin(t)
	extended, err := qe.MessageSetVisibilityByReceipt(ctx, db.MessageSetVisibilityByReceiptParams{
		QueueIds: []int64{m.QueueID}, Sequences: []int64{m.Sequence}, Tokens: [][]byte{m.LeaseToken},
		VisibilitySeconds: []int32{600}})
	if err != nil || len(extended) != 1 {
		t.Fatalf("extend: %v %v", extended, err)
	}
	acked := ackInBackground(t, f.q, m)
	waitForLockWait(t, f.pool)
	if err := txE.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := <-acked; n != 1 {
		t.Fatalf("the ack behind the extension settled %d rows, want 1", n)
	}
	var left int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM skipq.messages`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d messages left (%v), want 0", left, err)
	}
}

// Two acks of one receipt at once: the second waits for the first, finds
// the row gone and settles nothing.
func TestTwoAcksOfOneReceiptSettleOnce(t *testing.T) {
	f := setup(t, 1)
	ctx := context.Background()
	m := claim(t, f.q, 1, nil)[0]
	txA, qa := f.begin(t)
	if rows, err := qa.MessageAckByReceipt(ctx, ackParams(m)); err != nil || len(rows) != 1 {
		t.Fatalf("first ack: %v %v", rows, err)
	}
	acked := ackInBackground(t, f.q, m)
	waitForLockWait(t, f.pool)
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := <-acked; n != 0 {
		t.Fatalf("the second ack of one receipt settled %d rows, want 0", n)
	}
}

// repeated is n copies of v.
func repeated[T any](v T, n int) []T {
	vs := make([]T, n)
	for i := range vs {
		vs[i] = v
	}
	return vs
}

// ackInBackground acks m's receipt on its own connection and sends the
// number of rows acked.
func ackInBackground(t *testing.T, q *db.Queries, m db.SkipqMessage) <-chan int {
	t.Helper()
	acked := make(chan int, 1)
	go func() {
		rows, err := q.MessageAckByReceipt(context.Background(), ackParams(m))
		if err != nil {
			t.Error(err)
		}
		acked <- len(rows)
	}()
	return acked
}

// A nack that waits behind an uncommitted extension of the same delivery
// nacks the message's newest version once the extension commits, as the
// ack does: the message is ready again and its token gone.
func TestNackWaitingForAnExtendNacksTheNewestVersion(t *testing.T) {
	f := setup(t, 1)
	ctx := context.Background()
	m := claim(t, f.q, 1, nil)[0]
	txE, qe := f.begin(t)
	if extended, err := qe.MessageSetVisibilityByReceipt(ctx, db.MessageSetVisibilityByReceiptParams{
		QueueIds: []int64{m.QueueID}, Sequences: []int64{m.Sequence}, Tokens: [][]byte{m.LeaseToken},
		VisibilitySeconds: []int32{600}}); err != nil || len(extended) != 1 {
		t.Fatalf("extend: %v %v", extended, err)
	}
	nacked := make(chan int, 1)
	go func() {
		rows, err := f.q.MessageNack(ctx, db.MessageNackParams{QueueIds: []int64{m.QueueID}, Sequences: []int64{m.Sequence},
			Tokens: [][]byte{m.LeaseToken}, ServerMaxReceiveCount: 10})
		if err != nil {
			t.Error(err)
		}
		nacked <- len(rows)
	}()
	waitForLockWait(t, f.pool)
	if err := txE.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := <-nacked; n != 1 {
		t.Fatalf("the nack behind the extension settled %d rows, want 1", n)
	}
	if again := claim(t, f.q, 1, nil); len(again) != 1 || again[0].Sequence != m.Sequence {
		t.Fatalf("after the nack a claim got %v, want the nacked message", again)
	}
}

// An ack whose group_release waits for another transaction that changed
// the group's row (a release of the group's other message, which keeps
// the group's lease) still judges the group on the row's newest version:
// nothing of it is in flight any more, so its lease ends. Locked by its
// address, the row's newest version was not found and the group stayed
// leased until its lease ran out.
func TestAckReleasesAGroupWhoseRowChangedMeanwhile(t *testing.T) {
	f := setupFIFO(t)
	ctx := context.Background()
	sendGrouped(t, f.q, []string{"g1", "g2", "g3"}, []string{"G", "G", "G"})
	claimed := claimGrouped(t, f.q, 2, 2)
	if len(claimed) != 2 {
		t.Fatalf("claimed %+v, want G's first two messages", claimed)
	}
	txR, qr := f.begin(t)
	released, err := qr.MessageSetVisibilityByReceipt(ctx, db.MessageSetVisibilityByReceiptParams{
		QueueIds: []int64{claimed[0].QueueID}, Sequences: []int64{claimed[0].Sequence},
		Tokens: [][]byte{claimed[0].LeaseToken}, VisibilitySeconds: []int32{0}})
	if err != nil || len(released) != 1 {
		t.Fatalf("release: %v %v", released, err)
	}
	acked := ackInBackground(t, f.q, claimed[1])
	waitForLockWait(t, f.pool)
	if err := txR.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := <-acked; n != 1 {
		t.Fatalf("the ack settled %d rows, want 1", n)
	}
	var leased bool
	if err := f.pool.QueryRow(ctx, `SELECT leased_until > now() FROM skipq.message_groups WHERE group_id = 'G'`).
		Scan(&leased); err != nil || leased {
		t.Fatalf("group G leased: %v (%v), want its lease ended: nothing of it is in flight", leased, err)
	}
}
