package db_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/skipq/skipq/internal/db"
)

// One statement claims several queues, each as its own claim would: up to
// its count, in claim order, and a topic copy comes with its stored body
// in place of its empty one and without the tag that named it; a missing
// queue gives nothing.
func TestMessageClaimQueues(t *testing.T) {
	f := topicFixture(t)
	ctx := context.Background()
	subscribe(t, f.q, "g2")
	if got := publish(t, f.q, "p1", "p2"); got[0] != 2 || got[1] != 2 {
		t.Fatalf("published to %v groups, want 2 each", got)
	}
	if err := f.q.QueueCreateMissing(ctx, db.QueueCreateMissingParams{Tenant: "t", Names: []string{"plain"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.q.MessageInsert(ctx, sendParams("plain", 0, "s1")); err != nil {
		t.Fatal(err)
	}
	one := int32(1)
	rows, err := f.q.MessageClaimQueues(ctx, db.MessageClaimQueuesParams{
		Tenants:           []string{"t", "t", "t", "t"},
		Queues:            []string{"q", "missing", "plain", "g2"},
		MaxMessages:       []int32{2, 1, 5, 1},
		VisibilitySeconds: []*int32{nil, nil, &one, nil},
		KeyIDs:            []*int64{nil, nil, nil, nil},
		MaxResponseBytes:  []int64{1 << 20, 1 << 20, 1 << 20, 1 << 20},
		MessageOverheads:  []int64{700, 700, 700, 700},
	})
	if err != nil {
		t.Fatal(err)
	}
	type claimed struct {
		claim int32
		id    string
	}
	var got []claimed
	for _, r := range rows {
		got = append(got, claimed{r.Claim, r.Message.MessageID})
		m := r.Message
		var tags map[string]string
		if err := json.Unmarshal(m.Tags, &tags); err != nil {
			t.Fatal(err)
		}
		if string(m.Body) != "x" || tags["skipq.body"] != "" || len(m.LeaseToken) == 0 || m.ReceiveCount != 1 {
			t.Errorf("claim %d: body %q, tags %v, lease %x, receive count %d: want body x, no skipq.body, a lease",
				r.Claim, m.Body, tags, m.LeaseToken, m.ReceiveCount)
		}
		if copyOf := tags["skipq.topic"]; (copyOf == "tp") != (m.MessageID != "s1") {
			t.Errorf("message %s: skipq.topic %q", m.MessageID, copyOf)
		}
	}
	want := []claimed{{1, "p1"}, {1, "p2"}, {3, "s1"}, {4, "p1"}}
	if len(got) != len(want) {
		t.Fatalf("claimed %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("claimed %v, want %v", got, want)
		}
	}
}

// The pending-first claims of topic groups in one shared claim are made
// together (skipq.topic_copies_make_queues): each takes its group's oldest
// free pending rows whole, as many as hold 32 ids, leasing what it asked
// for and making the rest ready, and nothing more; a second claim of a queue already made is
// claimed as before (it walks what the first made ready); a group whose
// pending row another transaction holds is passed over without a wait,
// and claimed as before once the row is free.
func TestMessageClaimQueuesMakesGroupsTogether(t *testing.T) {
	f := topicFixture(t)
	ctx := context.Background()
	for _, g := range []string{"g2", "g3"} {
		subscribe(t, f.q, g)
	}
	// Two publishes: each group's rows hold a b and c, which a claim of
	// fewer than 32 takes together (they hold 32 ids or fewer).
	publish(t, f.q, "a", "b")
	publish(t, f.q, "c")
	if err := f.q.QueueCreateMissing(ctx, db.QueueCreateMissingParams{Tenant: "t", Names: []string{"plain"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.q.MessageInsert(ctx, sendParams("plain", 0, "s1")); err != nil {
		t.Fatal(err)
	}
	// A holds g3's rows: its claim of one took them whole, uncommitted.
	txA, qa := f.begin(t)
	if rows, err := qa.MessageClaim(ctx, db.MessageClaimParams{Tenant: "t", Queue: "g3", MaxMessages: 1,
		MaxResponseBytes: 1 << 20, Mode: "claim_pending_first"}); err != nil || len(rows) != 1 {
		t.Fatalf("A's claim of g3: %v %v", rows, err)
	}
	long := int32(600)
	claimAll := func(queues []string, max []int32, visibility []*int32) map[int32][]db.SkipqMessage {
		t.Helper()
		p := db.MessageClaimQueuesParams{Queues: queues, MaxMessages: max, VisibilitySeconds: visibility}
		for range queues {
			p.Tenants = append(p.Tenants, "t")
			p.KeyIDs = append(p.KeyIDs, nil)
			p.MaxResponseBytes = append(p.MaxResponseBytes, 1<<20)
			p.MessageOverheads = append(p.MessageOverheads, 700)
			p.Modes = append(p.Modes, "claim_pending_first")
		}
		var rows []db.ClaimedMessage
		blocked, done := waits(func() {
			var err error
			if rows, err = f.q.MessageClaimQueues(ctx, p); err != nil {
				t.Error(err)
			}
		})
		if blocked {
			t.Fatal("the shared claim waited for another transaction")
		}
		<-done
		out := map[int32][]db.SkipqMessage{}
		for _, r := range rows {
			out[r.Claim] = append(out[r.Claim], r.Message)
		}
		return out
	}
	ids := func(rows []db.SkipqMessage) string {
		var s []string
		for _, r := range rows {
			s = append(s, r.MessageID)
		}
		return strings.Join(s, " ")
	}
	got := claimAll([]string{"q", "g2", "q", "plain", "g3"}, []int32{1, 2, 1, 1, 1},
		[]*int32{nil, nil, &long, nil, nil})
	want := map[int32]string{1: "a", 2: "a b", 3: "b", 4: "s1"}
	if len(got) != len(want) {
		t.Fatalf("claims answered %v, want %v (g3's rows held by A: nothing)", got, want)
	}
	tokens := map[string]bool{}
	for claim, w := range want {
		if ids(got[claim]) != w {
			t.Fatalf("claim %d took %q, want %q", claim, ids(got[claim]), w)
		}
		for _, m := range got[claim] {
			if m.ReceiveCount != 1 || len(m.LeaseToken) == 0 || tokens[string(m.LeaseToken)] {
				t.Fatalf("claim %d: %s not leased to it alone (receive count %d, token %x)",
					claim, m.MessageID, m.ReceiveCount, m.LeaseToken)
			}
			tokens[string(m.LeaseToken)] = true
			if m.MessageID != "s1" && (string(m.Body) != "x" || strings.Contains(string(m.Tags), `"skipq.body"`)) {
				t.Fatalf("claim %d: copy %s with body %q, tags %s", claim, m.MessageID, m.Body, m.Tags)
			}
		}
	}
	// Each made claim filed one timer set of what it leased; the rest of
	// each row is ready.
	var sets, ready string
	if err := f.pool.QueryRow(ctx, `SELECT
		(SELECT string_agg(q.name || ':' || cardinality(s.sequences), ' ' ORDER BY q.name, cardinality(s.sequences))
		 FROM skipq.timer_sets s JOIN skipq.queues q ON q.id = s.queue_id),
		(SELECT string_agg(q.name || ':' || m.message_id, ' ' ORDER BY q.name, m.message_id)
		 FROM skipq.ready r JOIN skipq.queues q ON q.id = r.queue_id
		 JOIN skipq.messages m ON m.queue_id = r.queue_id AND m.sequence = r.sequence)`).Scan(&sets, &ready); err != nil {
		t.Fatal(err)
	}
	if sets != "g2:2 plain:1 q:1 q:1" || ready != "g2:c q:c" {
		t.Fatalf("timer sets %q, ready %q; want g2:2 plain:1 q:1 q:1 (one set a claim) and g2:c q:c", sets, ready)
	}
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got = claimAll([]string{"g3", "g2"}, []int32{2, 1}, []*int32{nil, nil})
	if ids(got[1]) != "b c" || ids(got[2]) != "c" {
		t.Fatalf("after A's commit g3 took %q, g2 %q; want b c (made ready by A), c", ids(got[1]), ids(got[2]))
	}
}

// Shared claims of three groups race each other and single claims of 40
// (which cut the row they end in) for the same pending rows, small ones
// that claims of one take several at a time: every copy is made exactly
// once in each group.
func TestConcurrentSharedClaimsMakeEachCopyOnce(t *testing.T) {
	f := topicFixture(t)
	ctx := context.Background()
	groups := []string{"q", "g2", "g3"}
	for _, g := range groups[1:] {
		subscribe(t, f.q, g)
	}
	const published = 8 * 32
	// Publishes of one to seven messages: rows of as many ids, which the
	// claims of one take several at a time.
	ids := make([]string, published)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%03d", i)
	}
	for i, k := 0, 0; i < published; k++ {
		j := min(i+k%7+1, published)
		publish(t, f.q, ids[i:j]...)
		i = j
	}
	shared := db.MessageClaimQueuesParams{Queues: groups}
	for range groups {
		shared.Tenants = append(shared.Tenants, "t")
		shared.MaxMessages = append(shared.MaxMessages, 1)
		shared.VisibilitySeconds = append(shared.VisibilitySeconds, nil)
		shared.KeyIDs = append(shared.KeyIDs, nil)
		shared.MaxResponseBytes = append(shared.MaxResponseBytes, 1<<20)
		shared.MessageOverheads = append(shared.MessageOverheads, 700)
		shared.Modes = append(shared.Modes, "claim_pending_first")
	}
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			for {
				var n int
				var err error
				if i%3 == 2 {
					var rows []db.SkipqMessage
					rows, err = f.q.MessageClaim(ctx, db.MessageClaimParams{Tenant: "t", Queue: groups[i%2],
						MaxMessages: 40, MaxResponseBytes: 1 << 30, Mode: "claim_pending_first"})
					n = len(rows)
				} else {
					var rows []db.ClaimedMessage
					rows, err = f.q.MessageClaimQueues(ctx, shared)
					n = len(rows)
				}
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					var left bool
					if err := f.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM skipq.topic_pending)
						OR EXISTS (SELECT 1 FROM skipq.ready)`).Scan(&left); err != nil || !left {
						return
					}
				}
			}
		})
	}
	wg.Wait()
	rows, err := f.pool.Query(ctx, `SELECT q.name, count(*), count(DISTINCT m.tags ->> 'skipq.body'),
		count(*) FILTER (WHERE m.receive_count <> 1)
		FROM skipq.messages m JOIN skipq.queues q ON q.id = m.queue_id GROUP BY q.name ORDER BY q.name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var name string
		var copies, distinct, notOnce int
		if err := rows.Scan(&name, &copies, &distinct, &notOnce); err != nil {
			t.Fatal(err)
		}
		seen++
		if copies != published || distinct != published || notOnce != 0 {
			t.Errorf("group %s: %d copies (%d distinct, %d not claimed once) of %d published, want each made and claimed once",
				name, copies, distinct, notOnce, published)
		}
	}
	if seen != len(groups) {
		t.Fatalf("%d groups hold copies, want %d", seen, len(groups))
	}
}
