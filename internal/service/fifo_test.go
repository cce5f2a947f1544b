package service_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/service"
)

// fifoFixture is a FIFO queue on a fresh database, with helpers that fail
// the test on any error.
type fifoFixture struct {
	t     *testing.T
	svc   *service.Service
	queue string
}

func newFIFO(t *testing.T, queue string, settings service.QueueSettings) fifoFixture {
	t.Helper()
	svc, _, _ := newService(t)
	yes := true
	settings.FIFO = &yes
	if _, _, err := svc.PutQueue(context.Background(), "default", queue, settings); err != nil {
		t.Fatal(err)
	}
	return fifoFixture{t: t, svc: svc, queue: queue}
}

// send sends each "group:body" as one message of that group, one request each.
func (f fifoFixture) send(msgs ...string) {
	f.t.Helper()
	for _, m := range msgs {
		g, body, _ := strings.Cut(m, ":")
		if _, err := f.svc.Send(context.Background(), "default", f.queue, service.MessageInput{Body: body, GroupID: g}); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f fifoFixture) receive(max, perGroup int) []service.Message {
	f.t.Helper()
	zero := 0
	msgs, err := f.svc.Receive(context.Background(), "default", f.queue, service.ReceiveOptions{
		MaxMessages: &max, MaxMessagesPerGroup: &perGroup, WaitSeconds: &zero})
	if err != nil {
		f.t.Fatal(err)
	}
	return msgs
}

func (f fifoFixture) ack(msgs ...service.Message) {
	f.t.Helper()
	res, err := f.svc.Ack(context.Background(), handlesOf(msgs))
	if err != nil || res.Succeeded != len(msgs) {
		f.t.Fatalf("ack: %+v %v", res, err)
	}
}

func handlesOf(msgs []service.Message) []string {
	var hs []string
	for _, m := range msgs {
		hs = append(hs, m.ReceiptHandle)
	}
	return hs
}

func bodies(msgs []service.Message) string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Body))
	}
	return strings.Join(out, " ")
}

// One consumer receiving one message at a time is served
// the groups in rotation, each group's messages in order.
func TestFIFORotation(t *testing.T) {
	f := newFIFO(t, "rot", service.QueueSettings{})
	f.send("A:A1", "A:A2", "A:A3", "A:A4", "A:A5", "B:B1", "B:B2", "B:B3", "C:C1", "C:C2")
	var got []service.Message
	for range 11 {
		msgs := f.receive(1, 1)
		if len(msgs) == 0 {
			break
		}
		got = append(got, msgs...)
		f.ack(msgs...)
	}
	if want := "A1 B1 C1 A2 B2 C2 A3 B3 A4 A5"; bodies(got) != want {
		t.Fatalf("delivered %q, want %q", bodies(got), want)
	}
	for _, m := range got {
		if m.GroupID == nil || *m.GroupID != string(m.Body[:1]) {
			t.Fatalf("message %s has groupId %v", m.Body, m.GroupID)
		}
	}
}

// An SQS-style batch takes each group's messages in
// order, group by group; a group is not served again while its batch is
// in flight, and is as soon as the batch is settled.
func TestFIFOBatchHoldsItsGroups(t *testing.T) {
	f := newFIFO(t, "batch", service.QueueSettings{})
	f.send("A:A1", "A:A2", "A:A3", "A:A4", "A:A5", "B:B1", "B:B2", "B:B3", "C:C1", "C:C2")
	first := f.receive(10, 10)
	if want := "A1 A2 A3 A4 A5 B1 B2 B3 C1 C2"; bodies(first) != want {
		t.Fatalf("batch %q, want %q", bodies(first), want)
	}
	for _, m := range first[1:] {
		if !m.VisibleUntil.Equal(*first[0].VisibleUntil) {
			t.Fatalf("one receive's messages have different leases: %v and %v", m.VisibleUntil, first[0].VisibleUntil)
		}
	}
	f.send("B:B4", "D:D1")
	if got := f.receive(10, 10); bodies(got) != "D1" {
		t.Fatalf("with A, B and C in flight a receive got %q, want only D1", bodies(got))
	}
	f.ack(first[5:8]...) // B1-B3: group B has nothing in flight
	if got := f.receive(10, 10); bodies(got) != "B4" {
		t.Fatalf("after B's batch was acked a receive got %q, want B4", bodies(got))
	}
}

// A nacked message is redelivered before the rest of its group, and only
// once nothing else of the group is in flight.
func TestFIFONackKeepsGroupOrder(t *testing.T) {
	f := newFIFO(t, "nack", service.QueueSettings{})
	f.send("A:A1", "A:A2", "A:A3")
	batch := f.receive(2, 2)
	if bodies(batch) != "A1 A2" {
		t.Fatalf("got %q", bodies(batch))
	}
	if _, err := f.svc.Nack(context.Background(), handlesOf(batch[:1]), nil); err != nil {
		t.Fatal(err)
	}
	if got := f.receive(10, 10); len(got) != 0 {
		t.Fatalf("A2 is still in flight, but a receive got %q", bodies(got))
	}
	f.ack(batch[1])
	if got := f.receive(10, 10); bodies(got) != "A1 A3" {
		t.Fatalf("after the batch settled a receive got %q, want A1 A3", bodies(got))
	}
}

// At the delivery limit the group's first message moves
// to the (FIFO) dead-letter queue with its groupId, and the group goes on
// with its next message.
func TestFIFODeadLetterUnblocksItsGroup(t *testing.T) {
	two, dlq := 2, "dl.dlq"
	f := newFIFO(t, "dl", service.QueueSettings{MaxReceiveCount: &two, DeadLetterQueue: &dlq})
	f.send("G:first", "G:second")
	for range 2 {
		m := f.receive(1, 1)
		if bodies(m) != "first" {
			t.Fatalf("got %q, want first", bodies(m))
		}
		if _, err := f.svc.Nack(context.Background(), handlesOf(m), nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.receive(1, 1); bodies(got) != "second" {
		t.Fatalf("after the head was dead-lettered a receive got %q, want second", bodies(got))
	}
	q, err := f.svc.GetQueue(context.Background(), "default", dlq)
	if err != nil {
		t.Fatal(err)
	}
	if !q.FIFO {
		t.Fatal("the dead-letter queue created for a FIFO queue is not FIFO")
	}
	dead := fifoFixture{t: t, svc: f.svc, queue: dlq}.receive(1, 1)
	if bodies(dead) != "first" || dead[0].GroupID == nil || *dead[0].GroupID != "G" {
		t.Fatalf("dead-letter queue holds %+v, want first in group G", dead)
	}
}

// Scaled down: concurrent consumers with batches,
// several messages per group and random nacks never hold one group twice,
// and each group's messages are processed in send order (each consumer
// settles a group's run in order: acks it whole, or nacks it whole).
func TestFIFOConcurrentConsumersKeepGroupsExclusiveAndOrdered(t *testing.T) {
	f := newFIFO(t, "load", service.QueueSettings{})
	// Consumers stop at the first error (one that gives up could leave its
	// messages to nobody) or when the test runs long.
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	const groups, perGroup, consumers = 20, 15, 8
	for i := range perGroup {
		batch := make([]service.MessageInput, groups)
		for g := range groups {
			batch[g] = service.MessageInput{Body: fmt.Sprint(i), GroupID: fmt.Sprintf("g%02d", g)}
		}
		if _, err := f.svc.SendBatch(ctx, "default", f.queue, batch); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	held := map[string]bool{}
	processed := map[string][]string{}
	done := 0
	var wg sync.WaitGroup
	errs := make(chan error, consumers)
	for c := range consumers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(c), 7))
			max, per, zero := 5, 1+rnd.IntN(3), 0
			for {
				mu.Lock()
				finished := done == groups*perGroup
				mu.Unlock()
				if finished || ctx.Err() != nil {
					return
				}
				msgs, err := f.svc.Receive(ctx, "default", f.queue, service.ReceiveOptions{
					MaxMessages: &max, MaxMessagesPerGroup: &per, WaitSeconds: &zero})
				if err != nil {
					errs <- err
					stop()
					return
				}
				runs := map[string][]service.Message{}
				var order []string
				mu.Lock()
				for _, m := range msgs {
					g := *m.GroupID
					if runs[g] == nil {
						if held[g] {
							mu.Unlock()
							errs <- fmt.Errorf("group %s delivered while another batch of it is in flight", g)
							stop()
							return
						}
						held[g] = true
						order = append(order, g)
					}
					runs[g] = append(runs[g], m)
				}
				mu.Unlock()
				for _, g := range order {
					run := runs[g]
					nack := rnd.IntN(5) == 0
					if len(run) > 1 && rnd.IntN(3) == 0 {
						// Nack the head alone first: it is available again,
						// but its group holds the rest of the batch, so no
						// receive may take the group before the rest is settled.
						if _, err := f.svc.Nack(ctx, handlesOf(run[:1]), nil); err != nil {
							errs <- err
							stop()
							return
						}
						run, nack = run[1:], true
					}
					mu.Lock()
					if !nack {
						for _, m := range run {
							processed[g] = append(processed[g], string(m.Body))
						}
						done += len(run)
					}
					delete(held, g)
					mu.Unlock()
					var err error
					if nack {
						_, err = f.svc.Nack(ctx, handlesOf(run), nil)
					} else {
						_, err = f.svc.Ack(ctx, handlesOf(run))
					}
					if err != nil {
						errs <- err
						stop()
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("consumers processed %d of %d messages within the test's time", done, groups*perGroup)
	}
	want := make([]string, perGroup)
	for i := range want {
		want[i] = fmt.Sprint(i)
	}
	for g, got := range processed {
		if !slices.Equal(got, want) {
			t.Fatalf("group %s processed %v, want %v", g, got, want)
		}
	}
	if len(processed) != groups {
		t.Fatalf("%d groups processed, want %d", len(processed), groups)
	}
}

// The SQL consumer API's receive serves a FIFO queue by its groups, as a
// receive over HTTP does: rotation, runs of max_messages_per_group, group_id.
func TestFIFOSQLReceive(t *testing.T) {
	svc, _, pool := newService(t)
	f := fifoFixture{t: t, svc: svc, queue: "sqlfifo"}
	f.send("A:A1", "A:A2", "A:A3", "B:B1")
	rows, err := pool.Query(context.Background(),
		`SELECT group_id, convert_from(body, 'UTF8') FROM skipq.receive('sqlfifo', 10, NULL, 2)`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var g, body string
		if err := rows.Scan(&g, &body); err != nil {
			t.Fatal(err)
		}
		got = append(got, g+":"+body)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"A:A1", "A:A2", "B:B1"}; !slices.Equal(got, want) {
		t.Fatalf("SQL receive got %v, want %v", got, want)
	}
}

// The SQL send takes groups with the HTTP API's rules: a grouped send
// creates a FIFO queue; a FIFO queue refuses a send without a group, a
// standard one a send with one (22023, nothing stored); sends to one group
// are delivered in order.
func TestFIFOSQLSend(t *testing.T) {
	svc, _, pool := newService(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `SELECT skipq.send('sqlsend', 'one', group_id => 'g');
		SELECT skipq.send_batch('sqlsend', ARRAY['two', 'three'], group_ids => ARRAY['g', 'h'])`); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		`SELECT skipq.send('sqlsend', 'no group')`,
		`SELECT skipq.send_batch('sqlsend', ARRAY['a', 'b'], group_ids => ARRAY['g', NULL])`,
		`SELECT skipq.send('sqlsend', 'bad group', group_id => 'no spaces')`,
		`SELECT skipq.send('plain', 'x'); SELECT skipq.send('plain', 'grouped', group_id => 'g')`,
	} {
		_, err := pool.Exec(ctx, bad)
		if err == nil || !strings.Contains(err.Error(), "22023") {
			t.Errorf("%s: %v, want SQLSTATE 22023", bad, err)
		}
	}
	f := fifoFixture{t: t, svc: svc, queue: "sqlsend"}
	q, err := svc.GetQueue(ctx, "default", "sqlsend")
	if err != nil || !q.FIFO || q.Stats.Available+q.Stats.Delayed+q.Stats.InFlight != 3 || q.Stats.Groups != 2 {
		t.Fatalf("the queue a grouped SQL send created: %+v %v", q, err)
	}
	if got := f.receive(10, 10); bodies(got) != "one two three" {
		t.Fatalf("received %q, want one two three", bodies(got))
	}
}

// An operator delete of a group's message in flight ends the group's lease
// (docs/FIFO.md: deleted messages unblock their group).
func TestFIFODeleteUnblocksItsGroup(t *testing.T) {
	f := newFIFO(t, "del", service.QueueSettings{})
	f.send("A:A1", "A:A2")
	held := f.receive(1, 1)
	if bodies(held) != "A1" {
		t.Fatalf("got %q", bodies(held))
	}
	if err := f.svc.DeleteMessage(context.Background(), "default", "del", held[0].MessageID); err != nil {
		t.Fatal(err)
	}
	if got := f.receive(1, 1); bodies(got) != "A2" {
		t.Fatalf("after the delete a receive got %q, want A2", bodies(got))
	}
}

// With contentBasedDeduplication, the same body twice
// within the window is a duplicate answered with the first messageId and
// sequence, whatever its metadata or group; in one batch too; a messageId
// still keys its own message.
func TestContentBasedDeduplication(t *testing.T) {
	yes := true
	f := newFIFO(t, "cbd", service.QueueSettings{ContentBasedDeduplication: &yes})
	ctx := context.Background()
	first, err := f.svc.Send(ctx, "default", "cbd", service.MessageInput{Body: "same", GroupID: "g"})
	if err != nil || first.Duplicate {
		t.Fatalf("first send: %+v %v", first, err)
	}
	again, err := f.svc.Send(ctx, "default", "cbd", service.MessageInput{Body: "same", Metadata: "other", GroupID: "h"})
	if err != nil || !again.Duplicate || again.MessageID != first.MessageID || again.Sequence != first.Sequence {
		t.Fatalf("resend of the same body: %+v %v, want a duplicate of %+v", again, err, first)
	}
	batch, err := f.svc.SendBatch(ctx, "default", "cbd", []service.MessageInput{
		{Body: "new", GroupID: "g"}, {Body: "new", GroupID: "g"}, {Body: "same", GroupID: "g", MessageID: "own-id"}})
	if err != nil {
		t.Fatal(err)
	}
	if batch[0].Duplicate || !batch[1].Duplicate || batch[1].MessageID != batch[0].MessageID || batch[2].Duplicate {
		t.Fatalf("batch: %+v", batch)
	}
	if got := f.receive(10, 10); bodies(got) != "same new same" {
		t.Fatalf("stored %q, want same new same", bodies(got))
	}
	// A standard queue without the setting keeps every send.
	for range 2 {
		if r, err := f.svc.Send(ctx, "default", "plain", service.MessageInput{Body: "same"}); err != nil || r.Duplicate {
			t.Fatalf("plain send: %+v %v", r, err)
		}
	}
}
