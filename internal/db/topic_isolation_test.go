package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/db"
)

// Publishes against the changes of a topic's subscriptions, two sessions
// interleaved: a publish takes the topic's lock shared for its
// transaction, subscribe, unsubscribe and topic delete take it
// exclusively, so a publish reaches exactly the groups subscribed when it
// ran, never some of a change's.

// topicFixture is setup's database with topic "tp" subscribed by queue q.
func topicFixture(t *testing.T) fixture {
	t.Helper()
	f := setup(t, 0)
	ctx := context.Background()
	if _, err := f.q.TopicCreate(ctx, db.TopicCreateParams{Tenant: "t", Name: "tp", DedupWindowSeconds: 300}); err != nil {
		t.Fatal(err)
	}
	subscribe(t, f.q, "q")
	return f
}

func subscribe(t *testing.T, q *db.Queries, queue string) {
	t.Helper()
	got, err := q.TopicSubscribe(context.Background(), db.TopicSubscribeParams{Tenant: "t", Topic: "tp", Queue: queue,
		MaxSubscriptions: 100})
	if err != nil || got != "created" {
		t.Fatalf("subscribe %s: %q %v", queue, got, err)
	}
}

// publish publishes one-byte messages with the given ids to topic "tp"
// and returns the groups each reached.
func publish(t *testing.T, q *db.Queries, ids ...string) []int32 {
	t.Helper()
	p := sendParams("tp", 0, ids...)
	rows, err := q.TopicPublish(context.Background(), p)
	if err != nil || len(rows) != len(ids) {
		t.Fatalf("publish: %v %v", rows, err)
	}
	out := make([]int32, len(rows))
	for i, r := range rows {
		out[i] = r.DeliveredTo
	}
	return out
}

// inQueue is the number of messages of queue (tenant "t") with the id: its
// rows, and the topic copies the queue has yet to make (skipq.topic_pending).
func inQueue(t *testing.T, f fixture, queue, id string) int {
	t.Helper()
	var n int
	err := f.pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM skipq.messages m JOIN skipq.queues q ON q.id = m.queue_id
		 WHERE q.tenant = 't' AND q.name = $1 AND m.message_id = $2)
		+ (SELECT count(*) FROM skipq.topic_pending p JOIN skipq.queues q ON q.id = p.queue_id
		   JOIN skipq.topic_bodies b ON b.id = ANY(p.body_ids)
		   WHERE q.tenant = 't' AND q.name = $1 AND b.message_id = $2)`,
		queue, id).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waits runs fn in a goroutine and says whether it was still blocked
// after 300 ms; done is closed when it returns.
func waits(fn func()) (blocked bool, done chan struct{}) {
	done = make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
		return false, done
	case <-time.After(300 * time.Millisecond):
		return true, done
	}
}

func TestSubscribeWaitsForAnOpenPublish(t *testing.T) {
	f := topicFixture(t)
	ctx := context.Background()
	txA, qa := f.begin(t)
	if got := publish(t, qa, "before"); got[0] != 1 {
		t.Fatalf("A's publish reached %d groups, want 1", got[0])
	}
	blocked, done := waits(func() { subscribe(t, f.q, "q2") })
	if !blocked {
		t.Fatal("the subscribe did not wait for the open publish")
	}
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	if n := inQueue(t, f, "q2", "before"); n != 0 {
		t.Fatalf("q2 got a message published before it subscribed")
	}
	if got := publish(t, f.q, "after"); got[0] != 2 {
		t.Fatalf("a publish after the subscription reached %d groups, want 2", got[0])
	}
	if inQueue(t, f, "q", "after") != 1 || inQueue(t, f, "q2", "after") != 1 {
		t.Fatal("a group lacks the message published after the subscription")
	}
}

func TestPublishWaitsForAnOpenSubscribe(t *testing.T) {
	f := topicFixture(t)
	ctx := context.Background()
	txB, qb := f.begin(t)
	subscribe(t, qb, "q2")
	var got []int32
	blocked, done := waits(func() { got = publish(t, f.q, "m") })
	if !blocked {
		t.Fatal("the publish did not wait for the open subscribe")
	}
	if err := txB.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	if got[0] != 2 || inQueue(t, f, "q2", "m") != 1 {
		t.Fatalf("the publish after the subscribe committed reached %v groups, q2 has %d", got, inQueue(t, f, "q2", "m"))
	}
}

func TestPublishWaitsForAnOpenUnsubscribe(t *testing.T) {
	f := topicFixture(t)
	ctx := context.Background()
	subscribe(t, f.q, "q2")
	txB, qb := f.begin(t)
	if found, err := qb.TopicUnsubscribe(ctx, db.TopicUnsubscribeParams{Tenant: "t", Topic: "tp", Queue: new("q")}); err != nil || !found {
		t.Fatalf("unsubscribe: %v %v", found, err)
	}
	var got []int32
	blocked, done := waits(func() { got = publish(t, f.q, "m") })
	if !blocked {
		t.Fatal("the publish did not wait for the open unsubscribe")
	}
	if err := txB.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	if got[0] != 1 || inQueue(t, f, "q", "m") != 0 || inQueue(t, f, "q2", "m") != 1 {
		t.Fatalf("after the unsubscribe the publish reached %v groups (q: %d, q2: %d); want q2 only",
			got, inQueue(t, f, "q", "m"), inQueue(t, f, "q2", "m"))
	}
}

func TestTopicDeleteWaitsForAnOpenPublishAndLeavesItsMessages(t *testing.T) {
	f := topicFixture(t)
	ctx := context.Background()
	txA, qa := f.begin(t)
	publish(t, qa, "m")
	blocked, done := waits(func() {
		if found, err := f.q.TopicUnsubscribe(ctx, db.TopicUnsubscribeParams{Tenant: "t", Topic: "tp"}); err != nil || !found {
			t.Errorf("topic delete: %v %v", found, err)
		}
	})
	if !blocked {
		t.Fatal("the topic delete did not wait for the open publish")
	}
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	if inQueue(t, f, "q", "m") != 1 {
		t.Fatal("the topic's delete took the group's message")
	}
	if rows, err := f.q.TopicPublish(ctx, sendParams("tp", 0, "late")); err != nil || len(rows) != 0 {
		t.Fatalf("a publish to the deleted topic: %v %v; want no rows (not found)", rows, err)
	}
}

// A group's queue deleted while a publish to it is open: the delete does
// not wait (no foreign key), the copy it did not see is unreachable as any
// send's into a deleted queue (queue_delete_test.go), and the subscription
// goes with the worker's upkeep.
func TestQueueDeletedWhilePublishing(t *testing.T) {
	f := topicFixture(t)
	ctx := context.Background()
	subscribe(t, f.q, "q2")
	txA, qa := f.begin(t)
	publish(t, qa, "m")
	txB, qb := f.begin(t)
	id, err := qb.QueueDelete(ctx, db.QueueDeleteParams{Tenant: "t", Name: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := qb.MessageDeleteByQueue(ctx, db.MessageDeleteByQueueParams{QueueID: id}); err != nil {
		t.Fatal(err)
	}
	if err := txB.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if inQueue(t, f, "q2", "m") != 1 {
		t.Fatal("the other group lost its copy")
	}
	if got := publish(t, f.q, "next"); got[0] != 1 {
		t.Fatalf("a publish after the queue's delete reached %d groups, want 1", got[0])
	}
	if _, err := f.q.TopicUpkeep(ctx, db.TopicUpkeepParams{After: 0, MaxBodies: 1000}); err != nil {
		t.Fatal(err)
	}
	subs, err := f.q.TopicSubscriptionList(ctx, topicID(t, f))
	if err != nil || len(subs) != 1 || subs[0].Queue != "q2" {
		t.Fatalf("subscriptions after the upkeep: %v %v; want q2's", subs, err)
	}
	var left int
	if err := f.pool.QueryRow(ctx, "SELECT count(*) FROM skipq.topic_subscriptions WHERE queue_id = $1", id).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d subscriptions of the deleted queue left (%v)", left, err)
	}
}

func topicID(t *testing.T, f fixture) int64 {
	t.Helper()
	row, err := f.q.TopicGet(context.Background(), db.TopicGetParams{Tenant: "t", Name: "tp"})
	if err != nil {
		t.Fatal(err)
	}
	return row.ID
}

// A publish stores its body once; the copies name it, the SQL receive
// hands it out, and the worker removes it only when no copy names it and
// its dedup window ended. A copy that moves (here: dead-lettered) carries
// its body along.
func TestTopicBodyStoredOnceAndRemovedAfterItsCopies(t *testing.T) {
	f := topicFixture(t)
	ctx := context.Background()
	subscribe(t, f.q, "q2")
	if _, err := f.pool.Exec(ctx, `UPDATE skipq.topics SET dedup_window_seconds = 0;
		UPDATE skipq.queues SET dead_letter_queue = 'q2-dlq', max_receive_count = 1 WHERE name = 'q2'`); err != nil {
		t.Fatal(err)
	}
	publish(t, f.q, "m")
	var bodies int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM skipq.topic_bodies`).Scan(&bodies); err != nil || bodies != 1 ||
		inQueue(t, f, "q", "m") != 1 || inQueue(t, f, "q2", "m") != 1 {
		t.Fatalf("%d bodies (%v), copies %d and %d; want 1, 1 and 1", bodies, err, inQueue(t, f, "q", "m"), inQueue(t, f, "q2", "m"))
	}
	upkeep := func() int {
		t.Helper()
		if _, err := f.q.TopicUpkeep(ctx, db.TopicUpkeepParams{After: 0, MaxBodies: 1000}); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := f.pool.QueryRow(ctx, "SELECT count(*) FROM skipq.topic_bodies").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if upkeep() != 1 {
		t.Fatal("the upkeep removed a body whose copies the groups have yet to make")
	}
	var body string
	if err := f.pool.QueryRow(ctx, "SELECT convert_from(body, 'UTF8') FROM skipq.receive('q', tenant => 't')").Scan(&body); err != nil || body != "x" {
		t.Fatalf("SQL receive of a copy: %q %v", body, err)
	}
	// q2's copy dead-letters (a nack past its last delivery, into q2-dlq).
	rows := claimFrom(t, f.q, "q2")
	if _, err := f.q.MessageNack(ctx, db.MessageNackParams{QueueIds: []int64{rows[0].QueueID},
		Sequences: []int64{rows[0].Sequence}, Tokens: [][]byte{rows[0].LeaseToken}, ServerMaxReceiveCount: 10}); err != nil {
		t.Fatal(err)
	}
	var emptyCopies int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM skipq.messages
		WHERE body = '' AND tags ? 'skipq.body' AND tags->>'skipq.topic' = 'tp'`).Scan(&emptyCopies); err != nil || emptyCopies != 1 {
		t.Fatalf("%d copies naming the body (%v); want q's, in flight", emptyCopies, err)
	}
	if upkeep() != 1 {
		t.Fatal("the upkeep removed a body that q's copy (in flight) names")
	}
	if _, err := f.pool.Exec(ctx, "DELETE FROM skipq.messages m USING skipq.queues q WHERE q.id = m.queue_id AND q.name = 'q'"); err != nil {
		t.Fatal(err)
	}
	if upkeep() != 0 {
		t.Fatal("the upkeep kept a body no copy names")
	}
	var dead string
	if err := f.pool.QueryRow(ctx, `SELECT convert_from(m.body, 'UTF8') FROM skipq.messages m
		JOIN skipq.queues q ON q.id = m.queue_id WHERE q.name = 'q2-dlq'`).Scan(&dead); err != nil || dead != "x" {
		t.Fatalf("the dead letter's body: %q %v; want the published one", dead, err)
	}
}

func claimFrom(t *testing.T, q *db.Queries, queue string) []db.SkipqMessage {
	t.Helper()
	rows, err := q.MessageClaim(context.Background(), db.MessageClaimParams{Tenant: "t", Queue: queue, MaxMessages: 1,
		MaxResponseBytes: 1 << 30, Mode: "claim"})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim from %s: %v %v", queue, rows, err)
	}
	return rows
}
