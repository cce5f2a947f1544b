package db_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/testdb"
)

// FIFO specs (docs/DESIGN.md, "FIFO queues"): two sessions run the real
// statements with one transaction held open where the lock is.

func setupFIFO(t *testing.T) fixture {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	q := db.New(pool)
	if err := q.QueueCreateMissing(context.Background(), db.QueueCreateMissingParams{
		Tenant: "t", Names: []string{"q"}, Fifo: true}); err != nil {
		t.Fatal(err)
	}
	return fixture{pool: pool, q: q}
}

// sendGrouped sends one message per id, each to the group of the same index.
func sendGrouped(t *testing.T, q *db.Queries, ids, groups []string) []db.MessageInsertRow {
	t.Helper()
	p := sendParams("q", 0, ids...)
	for i := range groups {
		p.GroupIds = append(p.GroupIds, &groups[i])
	}
	rows, err := q.MessageInsert(context.Background(), p)
	if err != nil || len(rows) != len(ids) {
		t.Fatalf("send: %v %+v", err, rows)
	}
	return rows
}

func claimGrouped(t *testing.T, q *db.Queries, max, perGroup int32) []db.SkipqMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := q.MessageClaim(ctx, db.MessageClaimParams{Tenant: "t", Queue: "q",
		MaxMessages: max, MaxPerGroup: perGroup, MaxResponseBytes: 1 << 30, Mode: "claim"})
	if err != nil {
		t.Fatalf("claim (a timeout here means it blocked): %v", err)
	}
	return rows
}

func groupsOf(rows []db.SkipqMessage) map[string]int {
	out := map[string]int{}
	for _, r := range rows {
		out[*r.GroupID]++
	}
	return out
}

// Two receivers never hold one group. A claims group G in a transaction it
// keeps open; B's claim, meanwhile, passes G's locked row without waiting
// and takes H; after A commits, G is leased, and B gets nothing of it
// either -- although G's second message is ready all along.
func TestTwoClaimsNeverHoldOneGroup(t *testing.T) {
	f := setupFIFO(t)
	sendGrouped(t, f.q, []string{"g1", "g2", "h1"}, []string{"G", "G", "H"})
	txA, qa := f.begin(t)
	a := claimGrouped(t, qa, 1, 1)
	if len(a) != 1 || *a[0].GroupID != "G" {
		t.Fatalf("A claimed %+v, want G's first message", a)
	}
	b := claimGrouped(t, f.q, 10, 10)
	if g := groupsOf(b); len(b) != 1 || g["H"] != 1 {
		t.Fatalf("while A holds G, B claimed groups %v, want only H", g)
	}
	if err := txA.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c := claimGrouped(t, f.q, 10, 10); len(c) != 0 {
		t.Fatalf("G's batch is in flight (and H's), but a claim got %v", groupsOf(c))
	}
	// A's ack frees G: its second message comes next.
	if rows, err := f.q.MessageAckByReceipt(context.Background(), ackParams(a[0])); err != nil || len(rows) != 1 {
		t.Fatalf("ack: %v %v", rows, err)
	}
	if c := claimGrouped(t, f.q, 10, 10); len(c) != 1 || c[0].MessageID != "g2" {
		t.Fatalf("after the ack a claim got %+v, want g2", c)
	}
}

// A settle holds its group's row until it commits: a claim passes the group
// meanwhile (SKIP LOCKED) instead of reading a half-settled group, and
// takes it once the settle committed.
func TestClaimPassesAGroupBeingSettled(t *testing.T) {
	f := setupFIFO(t)
	sendGrouped(t, f.q, []string{"g1", "g2"}, []string{"G", "G"})
	first := claimGrouped(t, f.q, 1, 1)
	txA, qa := f.begin(t)
	if rows, err := qa.MessageAckByReceipt(context.Background(), ackParams(first[0])); err != nil || len(rows) != 1 {
		t.Fatalf("ack: %v %v", rows, err)
	}
	if c := claimGrouped(t, f.q, 10, 10); len(c) != 0 {
		t.Fatalf("a claim took %+v while the ack that frees G is uncommitted", c)
	}
	if err := txA.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c := claimGrouped(t, f.q, 10, 10); len(c) != 1 || c[0].MessageID != "g2" {
		t.Fatalf("after the ack committed a claim got %+v, want g2", c)
	}
}

// A transaction outside skipq (an SQL consumer's FOR UPDATE, say) holds
// group A's first message: a receive of one message passes A, whose group
// row it took first, and gets B's message instead of an empty answer; A is
// left receivable, and is served once the row is free.
func TestClaimPassesAGroupWhoseHeadIsHeldElsewhere(t *testing.T) {
	f := setupFIFO(t)
	sent := sendGrouped(t, f.q, []string{"a1", "b1"}, []string{"A", "B"})
	tx, err := f.pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(context.Background(),
		"SELECT 1 FROM skipq.messages WHERE queue_id = $1 AND sequence = $2 FOR UPDATE",
		sent[0].QueueID, sent[0].Sequence); err != nil {
		t.Fatal(err)
	}
	if c := claimGrouped(t, f.q, 1, 1); len(c) != 1 || c[0].MessageID != "b1" {
		t.Fatalf("while A's head is held a receive of one got %+v, want b1", c)
	}
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c := claimGrouped(t, f.q, 1, 1); len(c) != 1 || c[0].MessageID != "a1" {
		t.Fatalf("after the hold ended a receive got %+v, want a1", c)
	}
}

// A group's order is commit order (docs/FIFO.md): T1 sends to G and commits last; T2's send
// to G waits for T1's commit, so T2's message gets the later sequence and
// is delivered after T1's.
func TestSendsToOneGroupAreOrderedByCommit(t *testing.T) {
	f := setupFIFO(t)
	sendGrouped(t, f.q, []string{"first"}, []string{"other"}) // creates the queue's state
	txA, qa := f.begin(t)
	t1 := sendGrouped(t, qa, []string{"t1"}, []string{"G"})
	sent := make(chan []db.MessageInsertRow, 1)
	go func() {
		p := sendParams("q", 0, "t2")
		g := "G"
		p.GroupIds = []*string{&g}
		rows, err := f.q.MessageInsert(context.Background(), p)
		if err != nil {
			t.Error(err)
		}
		sent <- rows
	}()
	waitForLockWait(t, f.pool)
	select {
	case rows := <-sent:
		t.Fatalf("T2's send to G finished (%+v) while T1's send to G was uncommitted", rows)
	default:
	}
	if err := txA.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	t2 := <-sent
	if len(t2) != 1 || *t2[0].Sequence <= *t1[0].Sequence {
		t.Fatalf("T2's sequence %v is not after T1's %v", t2, t1)
	}
	var got []string
	for range 3 {
		for _, m := range claimGrouped(t, f.q, 10, 1) {
			if *m.GroupID == "G" {
				got = append(got, m.MessageID)
				if _, err := f.q.MessageAckByReceipt(context.Background(), ackParams(m)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if len(got) != 2 || got[0] != "t1" || got[1] != "t2" {
		t.Fatalf("G delivered %v, want [t1 t2]", got)
	}
}

// Sends to a group do not wait for a claim of the group (they never lock
// its row), and claims do not wait for sends.
func TestSendDoesNotWaitForAClaimOfItsGroup(t *testing.T) {
	f := setupFIFO(t)
	sendGrouped(t, f.q, []string{"g1"}, []string{"G"})
	_, qa := f.begin(t)
	if a := claimGrouped(t, qa, 1, 1); len(a) != 1 {
		t.Fatalf("claimed %+v", a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p := sendParams("q", 0, "g2")
	g := "G"
	p.GroupIds = []*string{&g}
	if rows, err := f.q.MessageInsert(ctx, p); err != nil || len(rows) != 1 {
		t.Fatalf("a send to G while a claim of G is open: %v %+v (a timeout means it waited)", err, rows)
	}
}

// A claim locks the groups it takes, not every group it might have taken:
// a receive of 10, five a group, from groups of five holds two groups while
// its transaction is open, and a second receive meanwhile takes the next
// two. (A claim that locked as many groups as it has room for messages, as
// before 00055, held all four, and the second receive got nothing.)
func TestClaimLeavesTheGroupsItDoesNotNeedToOthers(t *testing.T) {
	f := setupFIFO(t)
	var ids, groups []string
	for _, g := range []string{"A", "B", "C", "D"} {
		for i := range 5 {
			ids, groups = append(ids, g+string(rune('1'+i))), append(groups, g)
		}
	}
	sendGrouped(t, f.q, ids, groups)
	_, qa := f.begin(t)
	if a := groupsOf(claimGrouped(t, qa, 10, 5)); len(a) != 2 || a["A"] != 5 || a["B"] != 5 {
		t.Fatalf("A claimed groups %v, want A and B whole", a)
	}
	if b := groupsOf(claimGrouped(t, f.q, 10, 5)); len(b) != 2 || b["C"] != 5 || b["D"] != 5 {
		t.Fatalf("while A's claim is open, B claimed groups %v, want C and D whole", b)
	}
}

// A first pass counts on full runs and takes as few groups as they need;
// when runs are shorter, the next pass takes as many groups as the answer
// has room for, and one more pass follows one that met a held head. The
// answer still lists the groups in rotation order, each group's run in
// order, up to maxMessages.
func TestClaimFillsTheAnswerFromShortRuns(t *testing.T) {
	f := setupFIFO(t)
	sendGrouped(t, f.q,
		[]string{"a1", "a2", "a3", "b1", "c1", "c2", "d1", "e1", "f1", "g1", "g2"},
		[]string{"A", "A", "A", "B", "C", "C", "D", "E", "F", "G", "G"})
	// The first pass takes A, B and C (three groups of three would fill
	// 9) and gets 6; the second takes D, E and F, of which D gives nothing
	// (its head is held elsewhere); a third takes G.
	tx, err := f.pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(context.Background(),
		"SELECT 1 FROM skipq.messages WHERE message_id = 'd1' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range claimGrouped(t, f.q, 9, 3) {
		got = append(got, r.MessageID)
	}
	want := []string{"a1", "a2", "a3", "b1", "c1", "c2", "e1", "f1", "g1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("a receive of 9, three a group, got %v; want %v", got, want)
	}
}
