package worker_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/testdb"
	"github.com/skipq/skipq/internal/worker"
)

// The flat-claim invariant (docs/DESIGN.md, "The claim"): a message has a row
// in skipq.ready exactly when messages.ready is true, and a message that is
// not ready has a timer that will ready it (or dead-letter it) unless it is
// settled first. Checked after every step of a workload that takes every
// path that inserts, deletes or changes messages.
func TestReadyRowsFollowEveryPath(t *testing.T) {
	svc, clk, pool := newService(t)
	ctx := context.Background()
	fire, expire := worker.NewFireTimers(pool, svc), worker.NewRemoveExpired(pool, svc)
	check := func(step string) {
		t.Helper()
		var mismatched, orphanReady, untimed int
		err := pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM skipq.messages m
			 WHERE m.ready <> EXISTS (SELECT 1 FROM skipq.ready r WHERE r.queue_id = m.queue_id AND r.sequence = m.sequence)),
			(SELECT count(*) FROM skipq.ready r
			 WHERE NOT EXISTS (SELECT 1 FROM skipq.messages m WHERE m.queue_id = r.queue_id AND m.sequence = r.sequence)),
			(SELECT count(*) FROM skipq.messages m
			 WHERE NOT m.ready AND NOT EXISTS (
			     SELECT 1 FROM skipq.timers t WHERE t.queue_id = m.queue_id AND t.sequence = m.sequence AND t.due_at <= m.visible_at)
			   AND NOT EXISTS (
			     SELECT 1 FROM skipq.timer_sets s WHERE s.queue_id = m.queue_id AND m.sequence = ANY(s.sequences) AND s.due_at <= m.visible_at))`).
			Scan(&mismatched, &orphanReady, &untimed)
		if err != nil {
			t.Fatal(err)
		}
		if mismatched+orphanReady+untimed != 0 {
			t.Fatalf("after %s: %d messages whose ready flag disagrees with skipq.ready, %d ready rows without a message, %d waiting messages without a timer",
				step, mismatched, orphanReady, untimed)
		}
	}
	one, two, vis, delay, zero := 1, 2, 30, 60, 0
	dlq := "paths.dlq"
	receive := func(queue string, max int, o service.ReceiveOptions) []service.Message {
		t.Helper()
		o.MaxMessages, o.WaitSeconds = &max, &zero
		msgs, err := svc.Receive(ctx, "default", queue, o)
		if err != nil {
			t.Fatal(err)
		}
		return msgs
	}
	handles := func(msgs []service.Message) []string {
		var hs []string
		for _, m := range msgs {
			hs = append(hs, m.ReceiptHandle)
		}
		return hs
	}

	batch := make([]service.MessageInput, 10)
	for i := range batch {
		batch[i] = service.MessageInput{Body: "x", MaxReceiveCount: &two, DeadLetterQueue: &dlq}
	}
	batch[0].DelaySeconds = &delay
	if _, err := svc.SendBatch(ctx, "default", "paths", batch); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `SELECT skipq.send('paths', 'sql'), skipq.send('paths', 'sql later', delay_seconds => 60)`); err != nil {
		t.Fatal(err)
	}
	check("HTTP and SQL sends, delayed and not")

	got := receive("paths", 6, service.ReceiveOptions{VisibilitySeconds: &vis})
	check("a claim")
	receive("paths", 1, service.ReceiveOptions{VisibilitySeconds: &vis})
	check("a claim of one")
	if _, err := pool.Exec(ctx, `SELECT skipq.receive('paths', 2)`); err != nil {
		t.Fatal(err)
	}
	check("an SQL receive")
	if _, err := svc.Ack(ctx, handles(got[:1])); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Nack(ctx, handles(got[1:2]), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetVisibility(ctx, handles(got[2:3]), 120); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Requeue(ctx, handles(got[3:4]), "paths.other"); err != nil {
		t.Fatal(err)
	}
	check("ack, nack, extend, requeue")
	receive("paths", 1, service.ReceiveOptions{AutoAck: true})
	receive("paths", 3, service.ReceiveOptions{IsPeek: true})
	check("autoAck and peek")

	// Every lease and delay runs out: the worker readies what it must, and a
	// stale-but-valid handle of a readied message is settled by its holder.
	clk.advance(5 * time.Minute)
	if _, err := fire.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	check("timers fired")
	if _, err := svc.Ack(ctx, handles(got[4:5])); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetVisibility(ctx, handles(got[5:6]), 30); err != nil {
		t.Fatal(err)
	}
	check("ack and extend of leases the worker had readied")

	// Two deliveries each, then the worker dead-letters the second leases.
	for range 2 {
		receive("paths", 100, service.ReceiveOptions{VisibilitySeconds: &one})
		clk.advance(time.Minute)
		if _, err := fire.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		check("leases that ran out, up to dead-lettering")
	}
	if moved, _, err := svc.RedriveQueue(ctx, "default", dlq, "paths.redriven", 1000); err != nil || moved == 0 {
		t.Fatalf("redrive moved %d: %v", moved, err)
	}
	check("redrive")

	exp := 1
	if _, err := svc.Send(ctx, "default", "paths.redriven", service.MessageInput{Body: "short-lived", ExpirationSeconds: &exp, MessageID: "gone-soon"}); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteMessage(ctx, "default", "paths.redriven", "gone-soon"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Send(ctx, "default", "paths.redriven", service.MessageInput{Body: "short-lived", ExpirationSeconds: &exp}); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Minute)
	if n, err := expire.RunOnce(ctx); err != nil || n == 0 {
		t.Fatalf("expired %d: %v", n, err)
	}
	check("operator delete and expiry")
	if _, err := svc.PurgeQueue(ctx, "default", "paths.redriven"); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteQueue(ctx, "default", "paths.other"); err != nil {
		t.Fatal(err)
	}
	check("purge and queue deletion")
}

// An extend files a timer for the lease's new end; the claim's timer set,
// when it comes due, finds the message not due and is dropped, not filed
// again (a claim's timer was, every second until the extended lease ended).
func TestExtendedLeaseKeepsOnlyItsOwnTimer(t *testing.T) {
	svc, clk, pool := newService(t)
	ctx := context.Background()
	fire := worker.NewFireTimers(pool, svc)
	if _, err := svc.SendBatch(ctx, "default", "extended", []service.MessageInput{{Body: "x"}}); err != nil {
		t.Fatal(err)
	}
	one, vis, zero := 1, 30, 0
	msgs, err := svc.Receive(ctx, "default", "extended", service.ReceiveOptions{MaxMessages: &one, VisibilitySeconds: &vis, WaitSeconds: &zero})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %v, %d messages", err, len(msgs))
	}
	extended, err := svc.SetVisibility(ctx, []string{msgs[0].ReceiptHandle}, 600)
	if err != nil || extended.Succeeded != 1 {
		t.Fatalf("extend: %v, %+v", err, extended)
	}
	clk.advance(time.Duration(vis+1) * time.Second) // the claim's timer is due, the extended lease is not
	if _, err := fire.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	var timers, sets int
	var ready bool
	var due, visible time.Time
	err = pool.QueryRow(ctx, `SELECT count(*), max(t.due_at), bool_or(m.ready), max(m.visible_at),
		(SELECT count(*) FROM skipq.timer_sets)
		FROM skipq.messages m JOIN skipq.timers t ON t.queue_id = m.queue_id AND t.sequence = m.sequence`).
		Scan(&timers, &due, &ready, &visible, &sets)
	if err != nil {
		t.Fatal(err)
	}
	if timers != 1 || sets != 0 || !due.Equal(visible) || ready {
		t.Fatalf("%d timers (latest due %v) and %d sets for a message visible at %v, ready %v; want only the extend's timer and not ready",
			timers, due, sets, visible, ready)
	}
}

// The statistics of a drained table say it is almost empty. Planned on
// them, a join of the fired timers' keys to skipq.messages walked every
// message; skipq.message_fire finds each by its key whatever the
// statistics, so the buffers it reads do not grow with the backlog.
func TestFireReadsNoBacklogOnDrainedStatistics(t *testing.T) {
	svc, clk, pool := newService(t)
	ctx := context.Background()
	testdb.DrainedStatistics(t, pool)
	for range 8 {
		batch := make([]service.MessageInput, 500)
		for j := range batch {
			batch[j] = service.MessageInput{Body: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
		}
		if _, err := svc.SendBatch(ctx, "default", "busy", batch); err != nil {
			t.Fatal(err)
		}
	}
	max, vis, zero := 3, 30, 0
	leased, err := svc.Receive(ctx, "default", "busy", service.ReceiveOptions{MaxMessages: &max, VisibilitySeconds: &vis, WaitSeconds: &zero})
	if err != nil || len(leased) != max {
		t.Fatalf("receive: %v, %d messages", err, len(leased))
	}
	clk.advance(time.Minute)

	var queueID int64
	if err := pool.QueryRow(ctx, "SELECT id FROM skipq.queues WHERE name = 'busy'").Scan(&queueID); err != nil {
		t.Fatal(err)
	}
	var queueIDs, sequences []int64
	for _, m := range leased {
		queueIDs, sequences = append(queueIDs, queueID), append(sequences, m.Sequence)
	}
	// Twice on one connection, each time rolled back: the first call plans
	// the function's statements (reading the catalogs), the second is
	// measured.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var read int
	for range 2 {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		read = testdb.ExplainedBuffers(t, tx, "SELECT * FROM skipq.message_fire($1::bigint[], $2::bigint[], $3, 1)",
			queueIDs, sequences, clk.now())
		_ = tx.Rollback(ctx)
	}
	// Three messages found, locked, readied and filed in skipq.ready: a
	// few pages of each index and table (about 40), where a walk of the
	// backlog reads hundreds.
	if read > 150 {
		t.Fatalf("firing 3 timers read %d buffers behind 4,000 messages", read)
	}
}

// fireAll runs the timer job until a run takes nothing and returns how
// many messages each run took.
func fireAll(t *testing.T, fire *worker.FireTimers) []int {
	t.Helper()
	var taken []int
	for {
		n, err := fire.RunOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return taken
		}
		taken = append(taken, n)
	}
}

// timerSets reads the timers a test's claims filed: each set's sequences
// (sorted) and due time, and how many single timers there are.
func timerSets(t *testing.T, pool *pgxpool.Pool) (sets [][]int64, due []time.Time, single int) {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT ARRAY(SELECT x FROM unnest(s.sequences) x ORDER BY x), s.due_at
		FROM skipq.timer_sets s ORDER BY s.due_at, s.sequences[1]`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var seqs []int64
		var at time.Time
		if err := rows.Scan(&seqs, &at); err != nil {
			t.Fatal(err)
		}
		sets, due = append(sets, seqs), append(due, at)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM skipq.timers`).Scan(&single); err != nil {
		t.Fatal(err)
	}
	return sets, due, single
}

func sequencesOf(msgs []service.Message) []int64 {
	var seqs []int64
	for _, m := range msgs {
		seqs = append(seqs, m.Sequence)
	}
	slices.Sort(seqs)
	return seqs
}

// A claim files one timer set for all its messages, due when their leases
// end, and no single timer; the worker sleeps until the set is due, then
// fires every message in it.
func TestFireTakesTimerSets(t *testing.T) {
	svc, clk, pool := newService(t)
	ctx := context.Background()
	fire := worker.NewFireTimers(pool, svc)
	if _, err := svc.SendBatch(ctx, "default", "sets", []service.MessageInput{{Body: "a"}, {Body: "b"}, {Body: "c"}}); err != nil {
		t.Fatal(err)
	}
	max, vis, zero := 3, 30, 0
	leased, err := svc.Receive(ctx, "default", "sets", service.ReceiveOptions{MaxMessages: &max, VisibilitySeconds: &vis, WaitSeconds: &zero})
	if err != nil || len(leased) != max {
		t.Fatalf("receive: %v, %d messages", err, len(leased))
	}
	sets, due, single := timerSets(t, pool)
	if len(sets) != 1 || !slices.Equal(sets[0], sequencesOf(leased)) || !due[0].Equal(*leased[0].VisibleUntil) || single != 0 {
		t.Fatalf("the claim of %v until %v filed sets %v due %v and %d single timers; want one set of its messages due at the lease's end",
			sequencesOf(leased), *leased[0].VisibleUntil, sets, due, single)
	}
	clk.advance(time.Duration(vis-1) * time.Second)
	if n, err := fire.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("before the leases ended the worker took %d (%v)", n, err)
	}
	clk.advance(2 * time.Second)
	if n, err := fire.RunOnce(ctx); err != nil || n != max {
		t.Fatalf("after the leases ended the worker took %d (%v), want %d", n, err, max)
	}
	var ready, left int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM skipq.messages WHERE ready),
		(SELECT count(*) FROM skipq.timer_sets)`).Scan(&ready, &left); err != nil {
		t.Fatal(err)
	}
	if ready != max || left != 0 {
		t.Fatalf("after the set came due: %d of %d messages ready, %d sets left; want all ready, none left", ready, max, left)
	}
}

// Claims made together for several queues (skipq.message_claim_queues, the
// shared claim of single-message receives) file a set per claim.
func TestClaimOfSeveralQueuesFilesASetPerClaim(t *testing.T) {
	svc, _, pool := newService(t)
	ctx := context.Background()
	for _, q := range []string{"qa", "qb"} {
		if _, err := svc.SendBatch(ctx, "default", q, []service.MessageInput{{Body: "a"}, {Body: "b"}, {Body: "c"}}); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := pool.Query(ctx, `SELECT c.queue_id, c.sequence FROM skipq.message_claim_queues(NULL,
		ARRAY['default', 'default'], ARRAY['qa', 'qb'], ARRAY[2, 3], ARRAY[30, 60], ARRAY[NULL, NULL]::bigint[],
		ARRAY[1000000, 1000000]::bigint[], ARRAY[0, 0]::bigint[]) c ORDER BY c.claim, c.sequence`)
	if err != nil {
		t.Fatal(err)
	}
	claimed := map[int64][]int64{}
	for rows.Next() {
		var queue, seq int64
		if err := rows.Scan(&queue, &seq); err != nil {
			t.Fatal(err)
		}
		claimed[queue] = append(claimed[queue], seq)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var filed map[int64][]int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(jsonb_object_agg(s.queue_id::text,
		ARRAY(SELECT x FROM unnest(s.sequences) x ORDER BY x)), '{}') FROM skipq.timer_sets s`).Scan(&filed); err != nil {
		t.Fatal(err)
	}
	_, _, single := timerSets(t, pool)
	if len(claimed) != 2 || len(filed) != 2 || single != 0 {
		t.Fatalf("claimed %v, filed sets %v and %d single timers; want one set per claim", claimed, filed, single)
	}
	for queue, seqs := range claimed {
		if !slices.Equal(filed[queue], seqs) {
			t.Fatalf("queue %d: claimed %v, its set holds %v", queue, seqs, filed[queue])
		}
	}
}

// A set that comes due lists messages whose leases went their own ways
// since the claim: the worker fires only those still waiting for that
// moment. An acked message is gone; a released (nacked) one is ready
// already and gets no second ready row; an extended one, and one released
// and claimed again for longer, are in leases that have not ended (their
// holders can still settle them); one whose lease was shortened is due by
// its own timer and the set together, and is readied once; one left alone
// is readied.
func TestTimerSetFiresOnlyMessagesStillDue(t *testing.T) {
	svc, clk, pool := newService(t)
	ctx := context.Background()
	fire := worker.NewFireTimers(pool, svc)
	batch := make([]service.MessageInput, 6)
	for i := range batch {
		batch[i] = service.MessageInput{Body: "x"}
	}
	if _, err := svc.SendBatch(ctx, "default", "diverged", batch); err != nil {
		t.Fatal(err)
	}
	max, vis, zero := len(batch), 30, 0
	leased, err := svc.Receive(ctx, "default", "diverged", service.ReceiveOptions{MaxMessages: &max, VisibilitySeconds: &vis, WaitSeconds: &zero})
	if err != nil || len(leased) != max {
		t.Fatalf("receive: %v, %d messages", err, len(leased))
	}
	acked, again, extended, released, shortened, alone := leased[0], leased[1], leased[2], leased[3], leased[4], leased[5]
	if r, err := svc.Ack(ctx, []string{acked.ReceiptHandle}); err != nil || r.Succeeded != 1 {
		t.Fatalf("ack: %+v %v", r, err)
	}
	if r, err := svc.Nack(ctx, []string{again.ReceiptHandle, released.ReceiptHandle}, nil); err != nil || r.Succeeded != 2 {
		t.Fatalf("nack: %+v %v", r, err)
	}
	if r, err := svc.SetVisibility(ctx, []string{extended.ReceiptHandle}, 600); err != nil || r.Succeeded != 1 {
		t.Fatalf("extend: %+v %v", r, err)
	}
	if r, err := svc.SetVisibility(ctx, []string{shortened.ReceiptHandle}, 5); err != nil || r.Succeeded != 1 {
		t.Fatalf("shorten: %+v %v", r, err)
	}
	one, long := 1, 600
	// The claim takes the oldest ready message: again, not released.
	reclaimed, err := svc.Receive(ctx, "default", "diverged", service.ReceiveOptions{MaxMessages: &one, VisibilitySeconds: &long, WaitSeconds: &zero})
	if err != nil || len(reclaimed) != 1 || reclaimed[0].Sequence != again.Sequence {
		t.Fatalf("claim again: %v, %v", err, reclaimed)
	}
	again = reclaimed[0]

	clk.advance(time.Duration(vis+1) * time.Second) // the first claim's set is due, with the shortened lease's timer
	if _, err := fire.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT m.sequence, m.ready, m.receive_count,
		(SELECT count(*) FROM skipq.ready r WHERE r.queue_id = m.queue_id AND r.sequence = m.sequence)
		FROM skipq.messages m ORDER BY m.sequence`)
	if err != nil {
		t.Fatal(err)
	}
	type state struct {
		ready     bool
		received  int
		readyRows int
	}
	states := map[int64]state{}
	for rows.Next() {
		var seq int64
		var s state
		if err := rows.Scan(&seq, &s.ready, &s.received, &s.readyRows); err != nil {
			t.Fatal(err)
		}
		states[seq] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[int64]state{
		again.Sequence:     {ready: false, received: 2, readyRows: 0},
		released.Sequence:  {ready: true, received: 1, readyRows: 1},
		extended.Sequence:  {ready: false, received: 1, readyRows: 0},
		shortened.Sequence: {ready: true, received: 1, readyRows: 1},
		alone.Sequence:     {ready: true, received: 1, readyRows: 1},
	}
	if !maps.Equal(states, want) {
		t.Fatalf("after the set came due: %+v, want %+v", states, want)
	}
	// The leases that did not end still settle.
	if r, err := svc.Ack(ctx, []string{extended.ReceiptHandle, again.ReceiptHandle}); err != nil || r.Succeeded != 2 {
		t.Fatalf("ack of the leases still running: %+v %v", r, err)
	}
}

// The worker takes timer sets by the messages they hold, not by rows: a
// set may stand for a claim of up to the largest maxMessages of a receive
// (1,024 by default), and BatchSize sets of that size would make one
// transaction of a million messages. Sets are taken oldest first until
// they hold BatchSize messages, the one that reaches it whole, and at least
// one; single timers up to BatchSize beside them.
func TestFireTakesSetsUpToABatchOfMessages(t *testing.T) {
	svc, clk, pool := newService(t)
	ctx := context.Background()
	fire := worker.NewFireTimers(pool, svc)
	fire.BatchSize = 10
	batch := make([]service.MessageInput, 24)
	for i := range batch {
		batch[i] = service.MessageInput{Body: "x"}
	}
	delay := 1
	batch = append(batch, service.MessageInput{Body: "later", DelaySeconds: &delay}, service.MessageInput{Body: "later", DelaySeconds: &delay})
	if _, err := svc.SendBatch(ctx, "default", "bounded", batch); err != nil {
		t.Fatal(err)
	}
	vis, zero := 30, 0
	for _, size := range []int{4, 4, 4, 12} { // oldest first
		leased, err := svc.Receive(ctx, "default", "bounded", service.ReceiveOptions{MaxMessages: &size, VisibilitySeconds: &vis, WaitSeconds: &zero})
		if err != nil || len(leased) != size {
			t.Fatalf("receive: %v, %d messages", err, len(leased))
		}
		clk.advance(time.Second)
	}
	clk.advance(time.Duration(vis) * time.Second) // every set and both delays are due
	taken := fireAll(t, fire)
	// 4 + 4 + 4 (the third set reaches 10) and the two delayed messages;
	// then the set of 12 alone.
	if !slices.Equal(taken, []int{14, 12}) {
		t.Fatalf("runs took %v messages, want [14 12]", taken)
	}
	var ready int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM skipq.messages WHERE ready`).Scan(&ready); err != nil {
		t.Fatal(err)
	}
	if ready != len(batch) {
		t.Fatalf("%d of %d messages ready", ready, len(batch))
	}
}

// A FIFO claim files one timer set for its messages (since 00055), due at
// their lease's end, and no single timers; when the lease runs out the
// worker fires the set, and the groups' messages come back in order, each
// group's run where it was.
func TestFIFOClaimFilesOneTimerSetThatFires(t *testing.T) {
	svc, clk, pool := newService(t)
	ctx := context.Background()
	fire := worker.NewFireTimers(pool, svc)
	var in []service.MessageInput
	for _, m := range []struct{ id, group string }{{"g1", "G"}, {"g2", "G"}, {"g3", "G"}, {"h1", "H"}, {"h2", "H"}} {
		in = append(in, service.MessageInput{Body: m.id, MessageID: m.id, GroupID: m.group})
	}
	if _, err := svc.SendBatch(ctx, "default", "groups", in); err != nil {
		t.Fatal(err)
	}
	max, perGroup, vis, zero := 10, 10, 30, 0
	receive := func() []string {
		t.Helper()
		msgs, err := svc.Receive(ctx, "default", "groups", service.ReceiveOptions{MaxMessages: &max,
			MaxMessagesPerGroup: &perGroup, VisibilitySeconds: &vis, WaitSeconds: &zero})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range msgs {
			ids = append(ids, fmt.Sprintf("%s#%d", m.MessageID, m.ReceiveCount))
		}
		return ids
	}
	if got, want := receive(), []string{"g1#1", "g2#1", "g3#1", "h1#1", "h2#1"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("first receive: %v, want %v", got, want)
	}
	var timers, sets, covered int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM skipq.timers),
		(SELECT count(*) FROM skipq.timer_sets),
		(SELECT count(*) FROM skipq.timer_sets s JOIN skipq.messages m
		     ON m.queue_id = s.queue_id AND m.sequence = ANY(s.sequences) AND m.visible_at = s.due_at)`).
		Scan(&timers, &sets, &covered); err != nil {
		t.Fatal(err)
	}
	if timers != 0 || sets != 1 || covered != len(in) {
		t.Fatalf("after the claim: %d single timers, %d timer sets, %d messages in a set due at their lease's end; want 0, 1, %d",
			timers, sets, covered, len(in))
	}
	if got := receive(); len(got) != 0 {
		t.Fatalf("a receive while both groups are in flight got %v", got)
	}
	clk.advance(time.Duration(vis+1) * time.Second)
	if _, err := fire.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := receive(), []string{"g1#2", "g2#2", "g3#2", "h1#2", "h2#2"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the lease ran out and the set fired: %v, want %v", got, want)
	}
}
