package db_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/skipq/skipq/internal/db"
)

// A publish leaves a group's copies in pending rows of up to 32 ids; the
// group's claims make them, two sessions interleaved: a claim locks only
// the rows it takes from (a claim of fewer than 32 takes whole rows, as
// many as hold 32 ids, leasing what it asked for and making the rest
// ready), and passes over a
// row another claim holds instead of waiting for it, as it passes over a
// locked ready message.

// publishIDs publishes one unkeyed message a given id to topic "tp".
func publishIDs(t *testing.T, q *db.Queries, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%03d", i)
	}
	publish(t, q, ids...)
	return ids
}

// claimN claims up to max messages of queue "q" and returns their ids.
func claimN(t *testing.T, q *db.Queries, max int32) []string {
	t.Helper()
	var rows []db.SkipqMessage
	blocked, done := waits(func() {
		var err error
		rows, err = q.MessageClaim(context.Background(), db.MessageClaimParams{Tenant: "t", Queue: "q",
			MaxMessages: max, MaxResponseBytes: 1 << 30, Mode: "claim"})
		if err != nil {
			t.Error(err)
		}
	})
	if blocked {
		t.Fatal("a claim waited for another session")
	}
	<-done
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.MessageID
		if r.ReceiveCount != 1 || r.Ready || len(r.LeaseToken) == 0 {
			t.Fatalf("a copy made by a claim is not leased to it: %+v", r)
		}
	}
	return ids
}

func pendingRows(t *testing.T, f fixture) []int {
	t.Helper()
	var sizes []int
	rows, err := f.pool.Query(context.Background(), "SELECT cardinality(body_ids) FROM skipq.topic_pending ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

func TestClaimsMakePendingCopiesPassingEachOther(t *testing.T) {
	f := topicFixture(t)
	ctx := context.Background()
	ids := publishIDs(t, f.q, 40)
	if got := pendingRows(t, f); fmt.Sprint(got) != "[32 8]" {
		t.Fatalf("pending rows %v, want [32 8]", got)
	}
	seen := map[string]int{}
	txA, qa := f.begin(t)
	a := claimN(t, qa, 1)
	if fmt.Sprint(a) != "[m000]" {
		t.Fatalf("A claimed %v, want the oldest copy", a)
	}
	// B passes over the row A holds: the next row's copies, the three it
	// did not ask for made ready.
	b := claimN(t, f.q, 5)
	if fmt.Sprint(b) != "[m032 m033 m034 m035 m036]" {
		t.Fatalf("B claimed %v beside A, want five of the second row", b)
	}
	if got := pendingRows(t, f); fmt.Sprint(got) != "[32]" {
		t.Fatalf("pending rows %v beside A's claim, want A's row (its delete uncommitted), B's taken whole", got)
	}
	b2 := claimN(t, f.q, 10)
	if fmt.Sprint(b2) != "[m037 m038 m039]" {
		t.Fatalf("B claimed %v, want the second row's last three, made ready", b2)
	}
	if n := len(claimN(t, f.q, 10)); n != 0 {
		t.Fatalf("B claimed %d while A holds the first row and its copies", n)
	}
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rest := claimN(t, f.q, 40)
	if len(rest) != 31 {
		t.Fatalf("after A committed B claimed %d, want the 31 of A's row A made ready", len(rest))
	}
	for _, got := range [][]string{a, b, b2, rest} {
		for _, id := range got {
			seen[id]++
		}
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Fatalf("%s claimed %d times, want once", id, seen[id])
		}
	}
	if got := pendingRows(t, f); len(got) != 0 {
		t.Fatalf("pending rows left: %v", got)
	}
}

// A publish's pending rows are invisible to claims until it commits, and a
// claim does not wait for it; the worker's step passes over a row a claim
// holds, and a claim over a row the step holds.
func TestPendingCopiesAgainstPublishAndWorker(t *testing.T) {
	f := topicFixture(t)
	ctx := context.Background()
	txP, qp := f.begin(t)
	publishIDs(t, qp, 40)
	if n := len(claimN(t, f.q, 10)); n != 0 {
		t.Fatalf("a claim made %d copies of an open publish", n)
	}
	if err := txP.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	txA, qa := f.begin(t)
	if n := len(claimN(t, qa, 1)); n != 1 {
		t.Fatalf("A claimed %d, want 1", n)
	}
	ready := func(q *db.Queries) []db.TopicCopiesReadyRow {
		t.Helper()
		var rows []db.TopicCopiesReadyRow
		blocked, done := waits(func() {
			var err error
			rows, err = q.TopicCopiesReady(ctx, db.TopicCopiesReadyParams{
				PendingSeconds: -3600, MaxRows: 100})
			if err != nil {
				t.Error(err)
			}
		})
		if blocked {
			t.Fatal("the worker's step waited for a claim")
		}
		<-done
		return rows
	}
	if rows := ready(f.q); len(rows) != 1 || rows[0].Readied != 8 {
		t.Fatalf("the step beside A's claim made %+v ready, want the second row's 8", rows)
	}
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := pendingRows(t, f); len(got) != 0 {
		t.Fatalf("pending rows %v, want none: A took its row whole", got)
	}
	later := make([]string, 20)
	for i := range later {
		later[i] = fmt.Sprintf("n%03d", i)
	}
	publish(t, f.q, later...)
	txW, qw := f.begin(t)
	if rows := ready(qw); len(rows) != 1 || rows[0].Readied != 20 {
		t.Fatalf("the step made %+v ready, want the later publish's 20", rows)
	}
	// The step's row is gone in its transaction, its copies not yet
	// committed: a claim finds the 39 ready ones (A's 31, the first
	// step's 8), nothing else, at once.
	if n := len(claimN(t, f.q, 40)); n != 39 {
		t.Fatalf("a claim beside the open step got %d, want the 39 ready copies", n)
	}
	if err := txW.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(claimN(t, f.q, 40)); n != 20 {
		t.Fatalf("after the step a claim got %d, want 20", n)
	}
}

// A claim that asks for pending copies first makes them without the walk
// when the group has no ready message, across as many rows as it needs,
// and hands them out with their bodies in place, without the tag that
// names the stored body; two such claims pass each other's rows; a ready
// message still comes first.
func TestClaimPendingFirst(t *testing.T) {
	f := topicFixture(t)
	ctx := context.Background()
	publishIDs(t, f.q, 70)
	if got := pendingRows(t, f); fmt.Sprint(got) != "[32 32 6]" {
		t.Fatalf("pending rows %v, want [32 32 6]", got)
	}
	claimFirst := func(q *db.Queries, max int32) []db.SkipqMessage {
		t.Helper()
		var rows []db.SkipqMessage
		blocked, done := waits(func() {
			var err error
			rows, err = q.MessageClaim(ctx, db.MessageClaimParams{Tenant: "t", Queue: "q",
				MaxMessages: max, MaxResponseBytes: 1 << 30, Mode: "claim_pending_first"})
			if err != nil {
				t.Error(err)
			}
		})
		if blocked {
			t.Fatal("a claim waited for another session")
		}
		<-done
		return rows
	}
	idsOf := func(rows []db.SkipqMessage) string {
		ids := make([]string, len(rows))
		for i, r := range rows {
			ids[i] = r.MessageID
		}
		return fmt.Sprint(ids)
	}
	send := func(id string) {
		t.Helper()
		if rows, err := f.q.MessageInsert(ctx, sendParams("q", 0, id)); err != nil || len(rows) != 1 {
			t.Fatalf("send: %v %v", rows, err)
		}
	}
	got := claimFirst(f.q, 40)
	if len(got) != 40 || got[0].MessageID != "m000" || got[39].MessageID != "m039" {
		t.Fatalf("a claim of 40 took %s, want m000 … m039", idsOf(got))
	}
	for _, r := range got {
		if string(r.Body) != "x" || !strings.Contains(string(r.Tags), `"skipq.topic"`) ||
			strings.Contains(string(r.Tags), `"skipq.body"`) || r.ReceiveCount != 1 || len(r.LeaseToken) == 0 {
			t.Fatalf("a copy made first: body %q, tags %s, receive count %d", r.Body, r.Tags, r.ReceiveCount)
		}
	}
	if rows := pendingRows(t, f); fmt.Sprint(rows) != "[24 6]" {
		t.Fatalf("pending rows after taking 40: %v, want the second cut to 24 and the third", rows)
	}
	publish(t, f.q, "n1", "n2", "n3")
	txA, qa := f.begin(t)
	if a := claimFirst(qa, 30); len(a) != 30 || a[0].MessageID != "m040" || a[29].MessageID != "m069" {
		t.Fatalf("A took %s, want the 30 of the two rows that hold 32 ids together", idsOf(a))
	}
	if b := idsOf(claimFirst(f.q, 10)); b != "[n1 n2 n3]" {
		t.Fatalf("B beside A took %s, want the row A left", b)
	}
	send("ready")
	if b := idsOf(claimFirst(f.q, 10)); b != "[ready]" {
		t.Fatalf("B, with the pending rows held or gone, took %s, want the ready message", b)
	}
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(claimFirst(f.q, 10)); n != 0 {
		t.Fatalf("a claim of a drained group took %d", n)
	}
	send("ready2")
	publish(t, f.q, "p1", "p2")
	if b := idsOf(claimFirst(f.q, 2)); b != "[ready2 p1]" {
		t.Fatalf("a claim of 2 beside a ready message took %s, want it first, then a copy", b)
	}
	if b := idsOf(claimFirst(f.q, 2)); b != "[p2]" {
		t.Fatalf("the next claim took %s, want the last copy", b)
	}
	if rows := pendingRows(t, f); len(rows) != 0 {
		t.Fatalf("pending rows left: %v", rows)
	}
}

// Each group's pending copies of a publish start a row of their own: 40
// positions make rows of 32 and 8 in every group, not a second group's
// run that begins mid-row.
func TestPendingRowsStartAtEachGroup(t *testing.T) {
	f := topicFixture(t)
	subscribe(t, f.q, "q2")
	publishIDs(t, f.q, 40)
	if got := pendingRows(t, f); fmt.Sprint(got) != "[32 8 32 8]" {
		t.Fatalf("pending rows %v, want [32 8] for each of two groups", got)
	}
}

// A message of a pending copy's id that another transaction inserts into
// the group while a claim makes the copy: the claim's insert waits for it,
// fails when it commits, and is made again; the copy, made later, gets a
// fresh id; both messages are kept.
func TestClaimMakesACopyWhoseIDAnotherInsertTook(t *testing.T) {
	f := topicFixture(t)
	ctx := context.Background()
	publishIDs(t, f.q, 1)
	txB, qb := f.begin(t)
	if rows, err := qb.MessageInsert(ctx, sendParams("q", 0, "m000")); err != nil || len(rows) != 1 {
		t.Fatalf("send of the copy's id: %v %v", rows, err)
	}
	type result struct {
		rows []db.SkipqMessage
		err  error
	}
	done := make(chan result, 1)
	go func() {
		rows, err := f.q.MessageClaim(ctx, db.MessageClaimParams{Tenant: "t", Queue: "q",
			MaxMessages: 1, MaxResponseBytes: 1 << 30, Mode: "claim_pending_first"})
		done <- result{rows, err}
	}()
	waitForLockWait(t, f.pool)
	if err := txB.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Made again, the claim finds the sent message ready, and takes it
	// first; the next one makes the copy.
	got := <-done
	if got.err != nil || len(got.rows) != 1 || got.rows[0].MessageID != "m000" ||
		strings.Contains(string(got.rows[0].Tags), `"skipq.topic"`) {
		t.Fatalf("the claim: %v, %+v; want the sent message", got.err, got.rows)
	}
	rows, err := f.q.MessageClaim(ctx, db.MessageClaimParams{Tenant: "t", Queue: "q",
		MaxMessages: 1, MaxResponseBytes: 1 << 30, Mode: "claim_pending_first"})
	if err != nil || len(rows) != 1 {
		t.Fatalf("the next claim: %v, %d rows", err, len(rows))
	}
	if c := rows[0]; c.MessageID == "m000" || string(c.Body) != "x" || !strings.Contains(string(c.Tags), `"skipq.topic"`) {
		t.Fatalf("the copy: id %s, body %q, tags %s; want a fresh id and the published body", c.MessageID, c.Body, c.Tags)
	}
	var n int
	if err := f.pool.QueryRow(ctx, "SELECT count(*) FROM skipq.messages").Scan(&n); err != nil || n != 2 {
		t.Fatalf("messages: %d (%v), want the sent one and the copy", n, err)
	}
	if rows := pendingRows(t, f); len(rows) != 0 {
		t.Fatalf("pending rows left: %v", rows)
	}
}

// Many claims race for the same pending rows, each taking what it can:
// every copy is made exactly once. Claims of 40 cut the row they end in:
// a claim whose statement began before another's cut committed locks the
// cut row's newer version, and must change that version, not the one its
// snapshot sees (which would leave the ids it made pending, to be made
// again). Claims of one take their row whole (00062) and make the rest
// ready, which the others then walk.
func TestConcurrentClaimsMakeEachCopyOnce(t *testing.T) {
	f := topicFixture(t)
	ctx := context.Background()
	const published = 16 * 32
	publishIDs(t, f.q, published)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			max := int32(1)
			if i%2 == 1 {
				max = 40
			}
			for {
				rows, err := f.q.MessageClaim(ctx, db.MessageClaimParams{Tenant: "t", Queue: "q",
					MaxMessages: max, MaxResponseBytes: 1 << 30, Mode: "claim_pending_first"})
				if err != nil {
					t.Error(err)
					return
				}
				if len(rows) == 0 {
					var left bool
					if err := f.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM skipq.topic_pending)").Scan(&left); err != nil || !left {
						return
					}
				}
			}
		})
	}
	wg.Wait()
	var copies, distinct int
	if err := f.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT tags ->> 'skipq.body') FROM skipq.messages`).
		Scan(&copies, &distinct); err != nil {
		t.Fatal(err)
	}
	if copies != published || distinct != published {
		t.Fatalf("%d copies of %d published messages (%d distinct), want each made once", copies, published, distinct)
	}
}

// The SQL receive hands a topic copy out with its stored body and without
// the tag that names it, whether its claim made the copy or the copy was
// a ready message (made ready by the claim before, which took its row
// whole).
func TestSQLReceiveHandsCopiesOutWithoutTheBodyTag(t *testing.T) {
	f := topicFixture(t)
	publish(t, f.q, "a", "b")
	for _, want := range []string{"a", "b"} {
		var id, body, tags string
		if err := f.pool.QueryRow(context.Background(), `SELECT message_id, convert_from(body, 'UTF8'), tags::text
			FROM skipq.receive('q', tenant => 't')`).Scan(&id, &body, &tags); err != nil {
			t.Fatal(err)
		}
		if id != want || body != "x" || !strings.Contains(tags, `"skipq.topic"`) || strings.Contains(tags, `"skipq.body"`) {
			t.Fatalf("SQL receive: %s, body %q, tags %s; want %s, the published body, skipq.topic and no skipq.body", id, body, tags, want)
		}
	}
}
