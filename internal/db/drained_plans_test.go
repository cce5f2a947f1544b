package db_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
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
	testdb.ExecAll(t, pool,
		`ALTER TABLE skipq.ready SET (autovacuum_enabled = false)`,
		`INSERT INTO skipq.ready (queue_id, sequence) SELECT 0, g FROM generate_series(1, 20000) g`,
		`DELETE FROM skipq.ready WHERE queue_id = 0 AND sequence < 20000`,
	)
	testdb.VacuumAnalyze(t, pool, "skipq.ready")
	testdb.ExecAll(t, pool, `DELETE FROM skipq.ready WHERE queue_id = 0`)
}

// xactReadyReads is the buffers of skipq.ready and its index that tx's
// backend read and has not yet sent to the statistics: the difference of
// two calls is what the statements between them read there.
func xactReadyReads(t *testing.T, tx pgx.Tx) int {
	t.Helper()
	var n int
	if err := tx.QueryRow(context.Background(), `SELECT pg_stat_get_xact_blocks_fetched('skipq.ready'::regclass)
		+ pg_stat_get_xact_blocks_fetched('skipq.ready_pkey'::regclass)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
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
	var readyRead int
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
		readyBefore := xactReadyReads(t, tx)
		moved, err := q.MessageRedrive(ctx, db.MessageRedriveParams{QueueID: dlq, Sequences: seqs, ServerMaxReceiveCount: 10})
		if err != nil || len(moved) != 5 {
			t.Fatalf("redrove %d messages (%v), want 5", len(moved), err)
		}
		readyRead = xactReadyReads(t, tx) - readyBefore
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
	// The deletion of the dead letters' ready rows (a CTE the statement
	// does not read, left out of EXPLAIN's root) and the new messages'
	// ready rows: a few buffers each (a walk of the 5,000 ready rows, 16
	// bytes each, read 69).
	t.Logf("MessageRedrive of 5: %d buffers of skipq.ready", readyRead)
	if readyRead > 50 {
		t.Errorf("MessageRedrive of 5 read %d buffers of skipq.ready behind %d ready dead letters, want at most 50",
			readyRead, drainedBacklog)
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

// drainedSideTables gives skipq.dedup_keys and skipq.message_events the
// statistics of drained tables, as drainedReady does for skipq.ready.
func drainedSideTables(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	testdb.ExecAll(t, pool,
		`ALTER TABLE skipq.dedup_keys SET (autovacuum_enabled = false)`,
		`ALTER TABLE skipq.message_events SET (autovacuum_enabled = false)`,
		`INSERT INTO skipq.dedup_keys (queue_id, message_id, content_hash, sequence, sent_at, window_ends)
		 SELECT 0, 'gone-' || g, '\x00', g, now(), now() + interval '1 day' FROM generate_series(1, 20000) g`,
		`INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at)
		 SELECT g, 0, 'gone-' || g, 'sent', now() FROM generate_series(1, 20000) g`,
		`DELETE FROM skipq.dedup_keys WHERE queue_id = 0 AND message_id <> 'gone-20000'`,
		`DELETE FROM skipq.message_events WHERE queue_id = 0 AND trace_id < 20000`,
	)
	testdb.VacuumAnalyze(t, pool, "skipq.dedup_keys", "skipq.message_events")
	testdb.ExecAll(t, pool,
		`DELETE FROM skipq.dedup_keys WHERE queue_id = 0`,
		`DELETE FROM skipq.message_events WHERE queue_id = 0`,
	)
}

// sweepBacklog puts drainedBacklog rows behind each sweep and read of
// TestRarePathsPlannedOnDrainedStatisticsReadWhatTheyTouch, without an
// analyze: ready messages with keys in "busy", expired ones in "expiring",
// orphans of a queue that is gone, keys whose window passed and whose
// messages are gone, the history of gone messages, and ten ready messages
// in "small".
func sweepBacklog(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	if err := db.New(pool).QueueCreateMissing(ctx, db.QueueCreateMissingParams{Tenant: "t",
		Names: []string{"busy", "expiring", "small"}}); err != nil {
		t.Fatal(err)
	}
	testdb.ExecAll(t, pool,
		`INSERT INTO skipq.messages (queue_id, message_id, body, sent_at, visible_at, max_receive_count, ready, expires_at)
		 SELECT q.id, q.name || '-' || g, '\x78', now(), now(), 10, true,
		        CASE WHEN q.name = 'expiring' THEN now() - interval '1 minute' END
		 FROM skipq.queues q, generate_series(1, 5000) g
		 WHERE q.tenant = 't' AND q.name IN ('busy', 'expiring') OR q.name = 'small' AND g <= 10`,
		`INSERT INTO skipq.messages (queue_id, message_id, body, sent_at, visible_at, max_receive_count, ready)
		 SELECT 1000000, 'orphan-' || g, '\x78', now(), now(), 10, true FROM generate_series(1, 5000) g`, // no such queue
		`INSERT INTO skipq.ready (queue_id, sequence) SELECT queue_id, sequence FROM skipq.messages WHERE ready
		 ON CONFLICT DO NOTHING`,
		`INSERT INTO skipq.dedup_keys (queue_id, message_id, content_hash, sequence, sent_at, window_ends)
		 SELECT m.queue_id, m.message_id, '\x00', m.sequence, now(), now() + interval '1 hour'
		 FROM skipq.messages m JOIN skipq.queues q ON q.id = m.queue_id WHERE q.name = 'busy'`,
		`INSERT INTO skipq.dedup_keys (queue_id, message_id, content_hash, sequence, sent_at, window_ends)
		 SELECT q.id, 'sent-' || g, '\x00', g, now(), now() - interval '1 hour'
		 FROM skipq.queues q, generate_series(1, 5000) g WHERE q.name = 'busy'`,
		`INSERT INTO skipq.message_events (trace_id, queue_id, message_id, type, at, gone_at)
		 SELECT g, q.id, 'gone-' || g, 'acked', now() - interval '2 days', now() - interval '2 days'
		 FROM skipq.queues q, generate_series(1, 5000) g WHERE q.name = 'busy'`,
	)
}

// The statements of the rarer paths (the worker's sweeps, purge, operator
// delete and browse, the dead-letter list, search's page, the check of
// held ids) plan on whatever statistics the last analyze left. On a
// drained table's, a semi join by `IN (…)` chose a sweep's rows again for
// every row of a walk of the table (the expiry sweep read 116 million
// buffers behind 30,000 messages, and deleted far past its limit), a
// lateral probe of a ready row was flattened into a walk of ready_pkey per
// row, and reads by `sequence = ANY(…)` or joined by key walked the whole
// queue or table. Each must read about what it touches however much sits
// behind it.
func TestRarePathsPlannedOnDrainedStatisticsReadWhatTheyTouch(t *testing.T) {
	f := setup(t, 0)
	ctx := context.Background()
	testdb.DrainedStatistics(t, f.pool)
	drainedReady(t, f.pool)
	drainedSideTables(t, f.pool)
	deadLetters(t, f.pool, "dlq", drainedBacklog)
	sweepBacklog(t, f.pool)
	ids := map[string]int64{}
	var busy []int64
	rows, err := f.pool.Query(ctx, `SELECT name, id FROM skipq.queues`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var id int64
		if err := rows.Scan(&name, &id); err != nil {
			t.Fatal(err)
		}
		ids[name] = id
	}
	if err := f.pool.QueryRow(ctx, `SELECT array_agg(sequence) FROM (SELECT sequence FROM skipq.messages
		WHERE queue_id = $1 ORDER BY sequence OFFSET 2500 LIMIT 5) s`, ids["busy"]).Scan(&busy); err != nil {
		t.Fatal(err)
	}

	// Each case touches about ten rows: a few buffers each, and the pages
	// of the statement's own writes. Bounds are about twice what the probes
	// read; the walks read the pages of 5,000 to 30,000 rows, most of them
	// once per row touched.
	cases := []struct {
		name  string
		bound int
		run   func(q *db.Queries) (int, error)
		want  int
		// readyBound bounds what the statement's deletion of ready rows
		// reads of skipq.ready (a CTE the statement does not read, whose
		// buffers EXPLAIN leaves out of the root's); 0: none.
		readyBound int
	}{
		{"MessageDeleteExpired", 250, func(q *db.Queries) (int, error) {
			r, err := q.MessageDeleteExpired(ctx, db.MessageDeleteExpiredParams{MaxMessages: 10})
			return len(r), err
		}, 10, 60},
		{"MessageDeleteOrphaned", 250, func(q *db.Queries) (int, error) {
			r, err := q.MessageDeleteOrphaned(ctx, 10)
			return len(r), err
		}, 10, 60},
		{"DedupKeyDeleteExpired", 150, func(q *db.Queries) (int, error) {
			n, err := q.DedupKeyDeleteExpired(ctx, db.DedupKeyDeleteExpiredParams{MaxKeys: 10})
			return int(n), err
		}, 10, 0},
		{"MessageEventsPrune", 150, func(q *db.Queries) (int, error) {
			n, err := q.MessageEventsPrune(ctx, db.MessageEventsPruneParams{KeepSeconds: 86400, MaxTraces: 10})
			return int(n), err
		}, 10, 0},
		{"ReadyStaleRemove", 600, func(q *db.Queries) (int, error) {
			n, err := q.ReadyStaleRemove(ctx, 16)
			return int(n), err
		}, 0, 0},
		{"MessageDeleteByQueue", 250, func(q *db.Queries) (int, error) {
			n, err := q.MessageDeleteByQueue(ctx, db.MessageDeleteByQueueParams{QueueID: ids["small"]})
			return int(n), err
		}, 10, 60},
		{"MessageDeleteByID", 40, func(q *db.Queries) (int, error) {
			r, err := q.MessageDeleteByID(ctx, db.MessageDeleteByIDParams{QueueID: ids["busy"], MessageID: "busy-2500"})
			return int(r.Deleted), err
		}, 1, 10},
		{"MessageGetByID", 20, func(q *db.Queries) (int, error) {
			_, err := q.MessageGetByID(ctx, db.MessageGetByIDParams{QueueID: ids["busy"], MessageID: "busy-2500"})
			return 1, err
		}, 1, 0},
		{"MessageLockByID", 20, func(q *db.Queries) (int, error) {
			_, err := q.MessageLockByID(ctx, db.MessageLockByIDParams{QueueID: ids["busy"], MessageID: "busy-2500"})
			return 1, err
		}, 1, 0},
		{"MessageTraceOf", 20, func(q *db.Queries) (int, error) {
			_, err := q.MessageTraceOf(ctx, db.MessageTraceOfParams{QueueID: ids["busy"], MessageID: "busy-2500"})
			return 1, err
		}, 1, 0},
		{"MessageSearchByID", 30, func(q *db.Queries) (int, error) {
			r, err := q.MessageSearchByID(ctx, db.MessageSearchByIDParams{MessageID: "busy-2500",
				QueueIds: []int64{ids["busy"], ids["expiring"], ids["small"]}, States: []string{}, Tags: []byte("{}")})
			return len(r), err
		}, 1, 0},
		{"MessageBrowse", 100, func(q *db.Queries) (int, error) {
			r, err := q.MessageBrowse(ctx, db.MessageBrowseParams{QueueID: ids["busy"], MaxMessages: 10, MaxResponseBytes: 1 << 30})
			return len(r), err
		}, 10, 0},
		{"MessageDeadLetteredList", 150, func(q *db.Queries) (int, error) {
			r, err := q.MessageDeadLetteredList(ctx, db.MessageDeadLetteredListParams{Tenant: "t", MaxMessages: 10,
				MaxResponseBytes: 1 << 30})
			return len(r), err
		}, 10, 0},
		{"MessageGetByKeys", 60, func(q *db.Queries) (int, error) {
			r, err := q.MessageGetByKeys(ctx, db.MessageGetByKeysParams{QueueIds: repeated(ids["busy"], len(busy)), Sequences: busy})
			return len(r), err
		}, 5, 0},
		{"MessageIDsHeld", 60, func(q *db.Queries) (int, error) {
			r, err := q.MessageIDsHeld(ctx, db.MessageIDsHeldParams{Tenant: "t", Queue: "small",
				MessageIds: []string{"small-1", "small-2", "small-99"}})
			return len(r), err
		}, 2, 0},
	}
	explained, notices := testdb.Explained(t, f.pool.Config().ConnString())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tx, err := explained.BeginTx(ctx, db.TxOptions)
			if err != nil {
				t.Fatal(err)
			}
			notices()
			readyBefore := xactReadyReads(t, tx)
			n, err := c.run(db.New(tx))
			readyRead := xactReadyReads(t, tx) - readyBefore
			// A read's plan is reported when its portal closes, at the
			// transaction's end.
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if err != nil || n != c.want {
				t.Fatalf("%s: %d rows (%v), want %d", c.name, n, err, c.want)
			}
			buffers := statementBuffers(t, notices(), c.name)
			t.Logf("%s: %d buffers; %d in skipq.ready (with those of a ready rows' deletion the statement does not read)",
				c.name, buffers, readyRead)
			if c.readyBound > 0 && readyRead > c.readyBound {
				t.Errorf("%s read %d buffers of skipq.ready for %d messages, want at most %d: its ready rows' probe walks the table",
					c.name, readyRead, n, c.readyBound)
			}
			if buffers > c.bound {
				t.Errorf("%s read %d buffers for %d rows, want at most %d: its plan walks what sits behind them",
					c.name, buffers, n, c.bound)
			}
		})
	}
}

// The FIFO groups' functions that are not settles, planned on a drained
// skipq.message_groups (one live row over hundreds of pages) with 1,000
// groups behind: group_enter (every FIFO send) probed a group's row
// through an anti join that walked every group, and group_prune deleted
// the emptied groups of its window through a join that walked every group
// with them as a join filter. Each must read about what it touches.
func TestGroupFunctionsPlannedOnDrainedStatisticsReadWhatTheyTouch(t *testing.T) {
	f := setup(t, 0)
	ctx := context.Background()
	if err := f.q.QueueCreateMissing(ctx, db.QueueCreateMissingParams{Tenant: "t", Names: []string{"fifo"}, Fifo: true}); err != nil {
		t.Fatal(err)
	}
	var fifo int64
	if err := f.pool.QueryRow(ctx, `SELECT id FROM skipq.queues WHERE name = 'fifo'`).Scan(&fifo); err != nil {
		t.Fatal(err)
	}
	testdb.ExecAll(t, f.pool,
		`ALTER TABLE skipq.message_groups SET (autovacuum_enabled = false)`,
		`INSERT INTO skipq.message_groups (queue_id, group_id) SELECT 0, 'gone-' || g FROM generate_series(1, 20000) g`,
		`DELETE FROM skipq.message_groups WHERE queue_id = 0 AND group_id <> 'gone-1'`,
	)
	testdb.VacuumAnalyze(t, f.pool, "skipq.message_groups")
	for _, stmt := range []string{
		`DELETE FROM skipq.message_groups WHERE queue_id = 0`,
		// 1,000 groups with a message each, and 9 emptied ones first in
		// the primary key's order.
		`INSERT INTO skipq.messages (queue_id, message_id, body, sent_at, visible_at, max_receive_count, ready, group_id)
		 SELECT $1::bigint, 'm-' || g, '\x78', now(), now(), 10, true, 'G' || g FROM generate_series(1, 1000) g`,
		`INSERT INTO skipq.message_groups (queue_id, group_id)
		 SELECT $1::bigint, 'G' || g FROM generate_series(1, 1000) g UNION ALL SELECT $1::bigint, 'E' || g FROM generate_series(1, 9) g`,
	} {
		args := []any{}
		if strings.Contains(stmt, "$1") {
			args = append(args, fifo)
		}
		if _, err := f.pool.Exec(ctx, stmt, args...); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	calls := []struct {
		name  string
		sql   string
		args  []any
		bound int
	}{
		// Five groups that exist and two new ones: their locks, a probe
		// each, two rows inserted.
		{"group_enter", `SELECT skipq.group_enter($1::bigint[], $2::text[])`,
			[]any{repeated(fifo, 7), []string{"G1", "G2", "G3", "G4", "G5", "new-1", "new-2"}}, 100},
		// A window of 20 groups, each probed for a message (by design),
		// the 9 emptied ones locked and deleted.
		{"group_prune", `SELECT * FROM skipq.group_prune(10, 20, $1, '')`, []any{fifo}, 250},
	}
	conn, err := f.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, c := range calls {
		// Twice, each rolled back: the first call plans the function's
		// statements (reading the catalogs), the second is measured.
		var read int
		for range 2 {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			read = testdb.ExplainedBuffers(t, tx, c.sql, c.args...)
			_ = tx.Rollback(ctx)
		}
		t.Logf("%s: %d buffers", c.name, read)
		if read > c.bound {
			t.Errorf("%s read %d buffers behind 1,000 groups, want at most %d: its plan walks the groups", c.name, read, c.bound)
		}
	}
}

// The topics' jobs in the worker, planned on drained skipq.messages and
// skipq.topic_retained with a backlog behind: topic_upkeep kept a body
// while a retained message or a copy named it through anti joins that can
// walk the message id index (or topic_retained) per body, topic_replay
// looked a retained message's copy up by message_id and queue_id (the
// primary key's walk of the queue costs the same), and
// topic_retention_prune deleted by a join by key that can walk the topic's
// retained messages per one deleted. Each must read about what it touches.
func TestTopicJobsPlannedOnDrainedStatisticsReadWhatTheyTouch(t *testing.T) {
	f := setup(t, 0)
	ctx := context.Background()
	testdb.DrainedStatistics(t, f.pool)
	if err := f.q.QueueCreateMissing(ctx, db.QueueCreateMissingParams{Tenant: "t", Names: []string{"sub"}}); err != nil {
		t.Fatal(err)
	}
	testdb.ExecAll(t, f.pool,
		`ALTER TABLE skipq.topic_retained SET (autovacuum_enabled = false)`,
		`ALTER TABLE skipq.topic_bodies SET (autovacuum_enabled = false)`,
		`INSERT INTO skipq.topics (tenant, name, retain_seconds) VALUES ('t', 'gone', 0), ('t', 'T', 3600)`,
		`INSERT INTO skipq.topic_retained (topic_id, id, message_id, published_at, client_id, metadata, body_binary,
		     tags, expiration_seconds, max_receive_count)
		 SELECT t.id, g, 'gone-' || g, now(), '', '', false, '{}', 0, 0
		 FROM skipq.topics t, generate_series(1, 20000) g WHERE t.name = 'gone'`,
		`INSERT INTO skipq.topic_bodies (id, topic_id, message_id, body, published_at, window_ends, delivered_to)
		 SELECT g, t.id, 'gone-' || g, '\x78', now(), now(), 1 FROM skipq.topics t, generate_series(1, 20000) g
		 WHERE t.name = 'gone'`,
		`DELETE FROM skipq.topic_retained WHERE id < 20000`,
		`DELETE FROM skipq.topic_bodies WHERE id < 20000`,
	)
	testdb.VacuumAnalyze(t, f.pool, "skipq.topic_retained", "skipq.topic_bodies")
	testdb.ExecAll(t, f.pool,
		`DELETE FROM skipq.topic_retained`,
		`DELETE FROM skipq.topic_bodies`,
		// Behind: 5,000 retained messages of T, retained for an hour and
		// published two hours ago, each with its copy in the queue "sub",
		// and 20 bodies whose window passed and that nothing names.
		`INSERT INTO skipq.topic_retained (topic_id, id, message_id, published_at, client_id, metadata, body_binary,
		     tags, expiration_seconds, max_receive_count)
		 SELECT t.id, g, 'r-' || g, now() - interval '2 hours', '', '', false, '{}', 0, 0
		 FROM skipq.topics t, generate_series(1, 5000) g WHERE t.name = 'T'`,
		`INSERT INTO skipq.messages (queue_id, message_id, body, sent_at, visible_at, max_receive_count, ready)
		 SELECT q.id, 'r-' || g, '\x78', now(), now(), 10, true FROM skipq.queues q, generate_series(1, 5000) g
		 WHERE q.name = 'sub'`,
		`INSERT INTO skipq.topic_bodies (id, topic_id, message_id, body, published_at, window_ends, delivered_to)
		 SELECT 100000 + g, t.id, 'b-' || g, '\x78', now() - interval '1 day', now() - interval '1 hour', 1
		 FROM skipq.topics t, generate_series(1, 20) g WHERE t.name = 'T'`,
		// And 5,000 bodies of keyed publishes still in their window.
		`INSERT INTO skipq.topic_bodies (id, topic_id, message_id, content_hash, body, published_at, window_ends, delivered_to)
		 SELECT 200000 + g, t.id, 'k-' || g, '\x00', '\x78', now(), now() + interval '1 hour', 1
		 FROM skipq.topics t, generate_series(1, 5000) g WHERE t.name = 'T'`,
	)
	// The replay of T into "sub", whose first retained messages are in the
	// queue already: set up in the measured transaction only, as it holds
	// the retention prune back.
	const replaying = `INSERT INTO skipq.topic_subscriptions (topic_id, queue_id, created_at)
		SELECT t.id, q.id, now() - interval '1 day' FROM skipq.topics t, skipq.queues q WHERE t.name = 'T' AND q.name = 'sub';
		INSERT INTO skipq.topic_replays (topic_id, queue_id, replay_from, replay_horizon, created_at)
		SELECT t.id, q.id, now() - interval '1 day', 20, now() FROM skipq.topics t, skipq.queues q
		WHERE t.name = 'T' AND q.name = 'sub'`
	calls := []struct {
		name, setup, sql string
		bound            int
	}{
		// 20 bodies: a probe of the retained messages, one of the
		// messages and one of the pending copies each, and their
		// deletion, with a probe of their parts each (00060: 220).
		{"topic_upkeep", "", `SELECT skipq.topic_upkeep(100000, 20)`, 250},
		// 10 retained messages walked in order and deleted.
		{"topic_retention_prune", "", `SELECT skipq.topic_retention_prune(now(), 10)`, 100},
		// 10 retained messages walked, each probed in the queue, none
		// copied, the replay's row moved on.
		{"topic_replay", replaying, `SELECT * FROM skipq.topic_replay(10)`, 150},
	}
	conn, err := f.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, c := range calls {
		// Twice, each rolled back: the first call plans, the second is
		// measured.
		var read int
		for range 2 {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if c.setup != "" {
				if _, err := tx.Exec(ctx, c.setup); err != nil {
					t.Fatal(err)
				}
			}
			read = testdb.ExplainedBuffers(t, tx, c.sql)
			_ = tx.Rollback(ctx)
		}
		t.Logf("%s: %d buffers", c.name, read)
		if read > c.bound {
			t.Errorf("%s read %d buffers, want at most %d: its plan walks what sits behind", c.name, read, c.bound)
		}
	}

	// A publish of five keys whose bodies exist (with another content:
	// conflicts, nothing written): the keys' locks and hashes, a probe of
	// each key's body.
	explained, notices := testdb.Explained(t, f.pool.Config().ConnString())
	p := sendParams("T", 0, "k-1", "k-2", "k-3", "k-4", "k-5")
	p.Keyed = repeated(true, 5)
	var read int
	for range 2 {
		tx, err := explained.BeginTx(ctx, db.TxOptions)
		if err != nil {
			t.Fatal(err)
		}
		notices()
		rows, err := db.New(tx).TopicPublish(ctx, p)
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if err != nil || len(rows) != 5 || rows[0].Outcome != "conflict" {
			t.Fatalf("publish of 5 keys: %+v (%v), want 5 conflicts", rows, err)
		}
		read = statementBuffers(t, notices(), "TopicPublish")
	}
	t.Logf("keyed topic_publish of 5: %d buffers", read)
	if read > 100 {
		t.Errorf("a keyed publish of 5 read %d buffers behind 5,000 bodies, want at most 100: its plan walks the topic's bodies", read)
	}
}

// A FIFO queue's claim (skipq.message_claim_grouped), planned on drained
// statistics of skipq.messages and skipq.ready with a backlog of 5,000
// messages in ten groups behind: the deletion of the claimed messages'
// ready rows by `queue_id = … AND sequence = ANY(…)` kept the sequences
// as a filter over a walk of the queue's ready rows. A claim of 100 (ten
// of each group) must read about what it takes, of the messages and of
// the ready rows; so must a claim of one message a group, whose walk and
// pass are one statement of their own.
func TestGroupedClaimPlannedOnDrainedStatisticsReadsWhatItTakes(t *testing.T) {
	f := setup(t, 0)
	ctx := context.Background()
	testdb.DrainedStatistics(t, f.pool)
	drainedReady(t, f.pool)
	if err := f.q.QueueCreateMissing(ctx, db.QueueCreateMissingParams{Tenant: "t", Names: []string{"fifo"}, Fifo: true}); err != nil {
		t.Fatal(err)
	}
	for b := range drainedBacklog / 1000 {
		ids := make([]string, 1000)
		for i := range ids {
			ids[i] = fmt.Sprintf("m-%d-%d", b, i)
		}
		p := sendParams("fifo", 0, ids...)
		for i := range ids {
			group := fmt.Sprintf("G%d", i%10)
			p.GroupIds = append(p.GroupIds, &group)
		}
		if _, err := f.q.MessageInsert(ctx, p); err != nil {
			t.Fatal(err)
		}
	}

	// Twice on one connection: the first claim, rolled back, plans the
	// function's statements; the second is measured.
	explained, notices := testdb.Explained(t, f.pool.Config().ConnString())
	for _, c := range []struct {
		mode     string
		max, per int32
	}{{"claim", 100, 10}, {"delete", 100, 10}, {"claim", 10, 1}, {"delete", 10, 1}} {
		mode := c.mode
		var buffers, readyRead, readyWalked int
		for range 2 {
			tx, err := explained.BeginTx(ctx, db.TxOptions)
			if err != nil {
				t.Fatal(err)
			}
			notices()
			readyBefore := xactReadyReads(t, tx)
			rows, err := db.New(tx).MessageClaim(ctx, db.MessageClaimParams{Tenant: "t", Queue: "fifo", MaxMessages: c.max,
				MaxPerGroup: c.per, MaxResponseBytes: 1 << 30, Mode: mode})
			readyRead = xactReadyReads(t, tx) - readyBefore
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if err != nil || len(rows) != int(c.max) {
				t.Fatalf("%s, %d a group: %d messages (%v), want %d", mode, c.per, len(rows), err, c.max)
			}
			got := notices()
			buffers = claimStatementBuffers(t, got)
			readyWalked = rowsFilteredOut(got, "ready")
		}
		t.Logf("grouped %s of %d, %d a group: %d buffers in its statements, %d of skipq.ready, %d ready rows passed over",
			mode, c.max, c.per, buffers, readyRead, readyWalked)
		// The walk read few buffers more than the probes do (ready rows
		// are small, and these lie in the index's order), but it visited
		// every ready row of the queue: 4,900 passed over by a filter.
		if readyWalked > 0 {
			t.Errorf("grouped %s of %d passed over %d ready rows behind %d ready messages, want none: "+
				"its deletion of ready rows walks the queue", mode, c.max, readyWalked, drainedBacklog)
		}
		// A probe of each ready row and its deletion: a few buffers a
		// message.
		if readyRead > 7*int(c.max) {
			t.Errorf("grouped %s of %d read %d buffers of skipq.ready behind %d ready messages, want at most %d: "+
				"its deletion of ready rows walks the queue", mode, c.max, readyRead, drainedBacklog, 7*c.max)
		}
		if buffers > 25*int(c.max) {
			t.Errorf("grouped %s of %d read %d buffers in its statements behind %d messages, want at most %d: "+
				"its plans walk the queue", mode, c.max, buffers, drainedBacklog, 25*c.max)
		}
	}
}

// rowsFilteredOut sums, over the plans among notices, the rows that the
// scans of table (by its name in the plan, without the schema) read and a
// filter then removed: rows a statement visited without touching them.
func rowsFilteredOut(notices []string, table string) int {
	removed := regexp.MustCompile(`Rows Removed by Filter: (\d+)`)
	total := 0
	for _, n := range notices {
		inScan := false
		for _, line := range strings.Split(n, "\n") {
			if strings.Contains(line, "->") || strings.Contains(line, " Scan ") {
				inScan = strings.Contains(line, " Scan ") && strings.Contains(line, " on "+table+" ")
			}
			if m := removed.FindStringSubmatch(line); inScan && m != nil {
				k, _ := strconv.Atoi(m[1])
				total += k
			}
		}
	}
	return total
}
