package db_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/testdb"
)

// drainedBacklog is how many messages the tests below put behind
// statements planned on drained statistics: a plan that walks them reads
// hundreds of buffers more than one that probes what it touches.
const drainedBacklog = 5000

// deadLetters adds n dead-lettered messages to a new queue named queue
// (tenant "t"), ready as a dead-letter queue holds them, come from the
// queue "q", without an analyze.
func deadLetters(t *testing.T, pool *pgxpool.Pool, queue string, n int) {
	t.Helper()
	ctx := context.Background()
	if err := db.New(pool).QueueCreateMissing(ctx, db.QueueCreateMissingParams{Tenant: "t", Names: []string{queue}}); err != nil {
		t.Fatal(err)
	}
	_, err := pool.Exec(ctx, `
		WITH dead AS (
		    INSERT INTO skipq.messages (queue_id, message_id, body, sent_at, visible_at, max_receive_count, ready,
		        dead_lettered_at, re_routed_from)
		    SELECT q.id, 'dead-' || g, '\x78', now(), now(), 10, true, now(), 'q'
		    FROM skipq.queues q, generate_series(1, $2::integer) g WHERE q.tenant = 't' AND q.name = $1
		    RETURNING queue_id, sequence)
		INSERT INTO skipq.ready (queue_id, sequence) SELECT queue_id, sequence FROM dead`, queue, n)
	if err != nil {
		t.Fatal(err)
	}
}

// drainedReady gives skipq.ready the statistics of a drained table (one
// live row over a hundred pages), as DrainedStatistics does for the
// messages.
func drainedReady(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	for _, stmt := range []string{
		`ALTER TABLE skipq.ready SET (autovacuum_enabled = false)`,
		`INSERT INTO skipq.ready (queue_id, sequence) SELECT 0, g FROM generate_series(1, 20000) g`,
		`DELETE FROM skipq.ready WHERE queue_id = 0 AND sequence < 20000`,
		`VACUUM ANALYZE skipq.ready`,
		`DELETE FROM skipq.ready WHERE queue_id = 0`,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
}

// statementBuffers is the shared buffers auto_explain reported for the
// statement named name (sqlc's "-- name:" line) among notices: the root
// node's, which counts those of the functions it called.
func statementBuffers(t *testing.T, notices []string, name string) int {
	t.Helper()
	buffers := regexp.MustCompile(`Buffers: shared hit=(\d+)(?: read=(\d+))?`)
	for _, n := range notices {
		if !strings.Contains(n, "-- name: "+name+" ") {
			continue
		}
		m := buffers.FindStringSubmatch(n)
		if m == nil {
			t.Fatalf("no buffers in the plan of %s: %s", name, n)
		}
		hit, _ := strconv.Atoi(m[1])
		read, _ := strconv.Atoi(m[2])
		return hit + read
	}
	t.Fatalf("no plan of %s among %d notices", name, len(notices))
	return 0
}

// A redrive moves a batch of dead letters out of a dead-letter queue in
// one transaction. Planned on a drained table's statistics, its
// statements took `queue_id = … AND sequence = ANY(…)` as a walk of the
// queue with the sequences as a filter: every batch read every dead letter
// behind it, of the messages and of the ready rows. Each must read about
// what it moves.
func TestRedrivePlannedOnDrainedStatisticsProbesEachMessage(t *testing.T) {
	f := setup(t, 0)
	ctx := context.Background()
	testdb.DrainedStatistics(t, f.pool)
	drainedReady(t, f.pool)
	deadLetters(t, f.pool, "dlq", drainedBacklog)
	var dlq int64
	if err := f.pool.QueryRow(ctx, `SELECT id FROM skipq.queues WHERE name = 'dlq'`).Scan(&dlq); err != nil {
		t.Fatal(err)
	}

	// Twice on one connection: the first time, rolled back, plans the
	// statements and group_enter's (reading the catalogs); the second is
	// measured.
	explained, notices := testdb.Explained(t, f.pool.Config().ConnString())
	var got []string
	for _, commit := range []bool{false, true} {
		tx, err := explained.BeginTx(ctx, db.TxOptions)
		if err != nil {
			t.Fatal(err)
		}
		q := db.New(tx)
		picked, err := q.MessageDeadLetteredPick(ctx, db.MessageDeadLetteredPickParams{QueueID: dlq, MaxMessages: 5})
		if err != nil || len(picked) != 5 {
			t.Fatalf("picked %d dead letters (%v), want 5", len(picked), err)
		}
		var seqs []int64
		for _, p := range picked {
			seqs = append(seqs, p.Sequence)
		}
		notices()
		if err := q.GroupEnterForRedrive(ctx, db.GroupEnterForRedriveParams{QueueID: dlq, Sequences: seqs}); err != nil {
			t.Fatal(err)
		}
		moved, err := q.MessageRedrive(ctx, db.MessageRedriveParams{QueueID: dlq, Sequences: seqs, ServerMaxReceiveCount: 10})
		if err != nil || len(moved) != 5 {
			t.Fatalf("redrove %d messages (%v), want 5", len(moved), err)
		}
		got = notices()
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Five probes of the messages (and of their ready rows) and five new
	// messages with their index entries and ready rows: about 100 buffers
	// in all; the walks read the pages of the 5,000 dead letters.
	for name, bound := range map[string]int{"GroupEnterForRedrive": 60, "MessageRedrive": 160} {
		buffers := statementBuffers(t, got, name)
		t.Logf("%s of 5 behind %d dead letters: %d buffers", name, drainedBacklog, buffers)
		if buffers > bound {
			t.Errorf("%s of 5 behind %d dead letters read %d buffers, want at most %d: its plan walks the queue",
				name, drainedBacklog, buffers, bound)
		}
	}
	var left, ready int
	if err := f.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE ready) FROM skipq.messages WHERE queue_id = $1`, dlq).
		Scan(&left, &ready); err != nil || left != drainedBacklog-5 {
		t.Fatalf("%d dead letters left (%v), want %d", left, err, drainedBacklog-5)
	}
	var readyRows int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM skipq.ready WHERE queue_id = $1`, dlq).Scan(&readyRows); err != nil || readyRows != ready {
		t.Fatalf("%d ready rows for %d ready dead letters (%v): the redrive left its ready rows", readyRows, ready, err)
	}
}
