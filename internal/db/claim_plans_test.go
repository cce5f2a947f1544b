package db_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/testdb"
)

// A standard claim's plans are generic and kept for a connection's life.
// Made on the statistics a vacuum takes of a drained table (one live row
// over a thousand pages), they must still read about what the claim
// returns: a probe of a message by key walked messages_queue_sent_idx over
// every message of the queue, and the delete of the ready rows and the
// update of the messages by `sequence = ANY(...)` walked all of the
// queue's ready rows and messages (4,753 buffers for a claim of 100 behind
// 5,000 messages, where the claim reads about 1,100).
func TestStandardClaimPlansIgnoreDrainedStatistics(t *testing.T) {
	f := setup(t, 0)
	ctx := context.Background()
	pool, q := f.pool, f.q
	// Drain: 25,000 messages, all but the last gone, then the vacuum's
	// statistics; no autovacuum may take newer ones during the test.
	testdb.ExecAll(t, pool,
		`ALTER TABLE skipq.messages SET (autovacuum_enabled = false)`,
		`ALTER TABLE skipq.ready SET (autovacuum_enabled = false)`,
		`INSERT INTO skipq.messages (queue_id, message_id, body, sent_at, visible_at, max_receive_count, ready)
		 SELECT q.id, 'fill-' || g, '\x78', now(), now(), 10, true
		 FROM skipq.queues q, generate_series(1, 25000) g WHERE q.tenant = 't' AND q.name = 'q'`,
		`INSERT INTO skipq.ready (queue_id, sequence) SELECT queue_id, sequence FROM skipq.messages`,
		`DELETE FROM skipq.ready WHERE sequence < (SELECT max(sequence) FROM skipq.ready)`,
		`DELETE FROM skipq.messages WHERE sequence < (SELECT max(sequence) FROM skipq.messages)`,
	)
	testdb.VacuumAnalyze(t, pool, "skipq.messages", "skipq.ready")
	for b := range 5 {
		ids := make([]string, 1000)
		for i := range ids {
			ids[i] = fmt.Sprintf("m-%d-%d", b, i)
		}
		if _, err := q.MessageInsert(ctx, sendParams("q", 0, ids...)); err != nil {
			t.Fatal(err)
		}
	}

	// The claim's plans are made on this connection's first call, on the
	// drained statistics.
	explained, notices := testdb.Explained(t, pool.Config().ConnString())
	for _, mode := range []string{"peek", "claim", "delete"} {
		notices()
		rows, err := db.New(explained).MessageClaim(ctx, db.MessageClaimParams{Tenant: "t", Queue: "q", MaxMessages: 100,
			MaxResponseBytes: 1 << 30, Mode: mode})
		if err != nil || len(rows) != 100 {
			t.Fatalf("%s: %d messages (%v), want 100", mode, len(rows), err)
		}
		buffers := claimStatementBuffers(t, notices())
		t.Logf("%s of 100: %d buffers", mode, buffers)
		// About 11 a message: a ready row, a range probe of the primary
		// key, the message, its update or delete.
		if buffers > 1500 {
			t.Errorf("%s of 100 behind 5,000 messages read %d buffers in its statements; its plans walk the queue", mode, buffers)
		}
	}
}

// claimStatementBuffers sums the buffers of the claim functions' own
// statements (auto_explain's nested plans that touch skipq.messages),
// leaving out the outer call, whose first run also reads the catalogs.
func claimStatementBuffers(t *testing.T, notices []string) int {
	t.Helper()
	buffers := regexp.MustCompile(`Buffers: shared hit=(\d+)(?: read=(\d+))?`)
	total := 0
	for _, n := range notices {
		if !strings.Contains(n, "skipq.messages") || strings.Contains(n, "FROM skipq.message_claim(") {
			continue
		}
		// The first Buffers line is the plan's root: the statement's total.
		if m := buffers.FindStringSubmatch(n); m != nil {
			hit, _ := strconv.Atoi(m[1])
			read, _ := strconv.Atoi(m[2])
			total += hit + read
		}
	}
	return total
}
