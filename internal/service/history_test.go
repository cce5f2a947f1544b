package service_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/worker"
)

// historyOf is a message's history as "type@queue" words, plus the events.
func historyOf(t *testing.T, svc *service.Service, queue, id string) (string, []service.HistoryEvent) {
	t.Helper()
	events, err := svc.MessageHistory(context.Background(), "default", queue, id)
	if err != nil {
		t.Fatalf("history of %s/%s: %v", queue, id, err)
	}
	words := make([]string, len(events))
	for i, e := range events {
		words[i] = e.Type + "@" + e.Queue
	}
	return strings.Join(words, " "), events
}

func receiveOne(t *testing.T, svc *service.Service, ctx context.Context, queue string) service.Message {
	t.Helper()
	vis := 30
	msgs, err := svc.Receive(ctx, "default", queue, service.ReceiveOptions{VisibilitySeconds: &vis, WaitSeconds: new(0)})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive from %s: %v %v", queue, msgs, err)
	}
	return msgs[0]
}

// The history of a message nacked, extended,
// dead-lettered (by its lease running out, then by a nack) and redriven
// lists every event in order across the queues, with the caller's key, the
// reasons and the moves; it is also found under the message's earlier id.
func TestHistoryFollowsAMessageAcrossQueues(t *testing.T) {
	svc, clk, pool := newService(t)
	fire := worker.NewFireTimers(pool, svc)
	fire.BatchSize = 100
	ctx := service.WithKeyID(context.Background(), 7)
	on, three, dlq := true, 3, "dlq"
	if _, _, err := svc.PutQueue(ctx, "default", "work", service.QueueSettings{Trace: &on, MaxReceiveCount: &three,
		DeadLetterQueue: &dlq}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutQueue(ctx, "default", "dlq", service.QueueSettings{}); err != nil {
		t.Fatal(err)
	}
	if q, err := svc.GetQueue(ctx, "default", "work"); err != nil || !q.Trace {
		t.Fatalf("work: trace %v (%v)", q.Trace, err)
	}
	if _, err := svc.Send(ctx, "default", "work", service.MessageInput{Body: "b", MessageID: "m1"}); err != nil {
		t.Fatal(err)
	}
	m := receiveOne(t, svc, ctx, "work")
	if _, err := svc.SetVisibility(ctx, []string{m.ReceiptHandle}, 60); err != nil {
		t.Fatal(err)
	}
	reason := "bad payload"
	if _, err := svc.Nack(ctx, []string{m.ReceiptHandle}, &reason); err != nil {
		t.Fatal(err)
	}
	receiveOne(t, svc, ctx, "work")
	clk.advance(45 * time.Second) // the second lease runs out
	for n := 1; n > 0; {
		var err error
		if n, err = fire.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	m = receiveOne(t, svc, ctx, "work")
	last := "still bad"
	if _, err := svc.Nack(ctx, []string{m.ReceiptHandle}, &last); err != nil {
		t.Fatal(err)
	}
	dead, err := svc.GetMessage(ctx, "default", "dlq", "m1")
	if err != nil {
		t.Fatalf("dead letter: %v", err)
	}
	redriven, err := svc.Redrive(ctx, "default", "dlq", dead.MessageID, "")
	if err != nil {
		t.Fatal(err)
	}
	m = receiveOne(t, svc, ctx, "work")
	if m.MessageID != redriven.MessageID {
		t.Fatalf("received %s, redriven %s", m.MessageID, redriven.MessageID)
	}
	if _, err := svc.Ack(ctx, []string{m.ReceiptHandle}); err != nil {
		t.Fatal(err)
	}

	want := "sent@work received@work extended@work nacked@work received@work lease_expired@work received@work " +
		"nacked@work dead_lettered@work redriven@dlq received@work acked@work"
	got, events := historyOf(t, svc, "work", redriven.MessageID)
	if got != want {
		t.Fatalf("history:\n got %s\nwant %s", got, want)
	}
	// The same trace under the ids it had before.
	for _, old := range []struct{ queue, id string }{{"work", "m1"}, {"dlq", "m1"}} {
		if again, _ := historyOf(t, svc, old.queue, old.id); again != want {
			t.Fatalf("history under %s/%s: %s", old.queue, old.id, again)
		}
	}
	for i, e := range events {
		worker := e.Type == "lease_expired"
		if worker != (e.KeyID == nil) || (e.KeyID != nil && *e.KeyID != 7) {
			t.Errorf("event %d %s: keyId %v", i, e.Type, e.KeyID)
		}
		if i > 0 && e.At.Before(events[i-1].At) {
			t.Errorf("event %d %s at %v, before the one ahead of it", i, e.Type, e.At)
		}
	}
	field := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}
	for _, c := range []struct {
		i    int
		what string
		want string
	}{
		{3, "reason", reason}, {7, "reason", last},
		{8, "toQueue", "dlq"}, {8, "cause", "nack"}, {8, "reason", last},
		{9, "toQueue", "work"}, {9, "newMessageId", redriven.MessageID},
	} {
		e := events[c.i]
		got := map[string]*string{"reason": e.Reason, "toQueue": e.ToQueue, "cause": e.Cause,
			"newMessageId": e.NewMessageID}[c.what]
		if field(got) != c.want {
			t.Errorf("event %d %s: %s %q, want %q", c.i, e.Type, c.what, field(got), c.want)
		}
	}
	if events[9].MessageID != dead.MessageID || events[10].MessageID != redriven.MessageID {
		t.Errorf("message ids: redriven %s, received %s", events[9].MessageID, events[10].MessageID)
	}
	if r := events[6]; r.ReceiveCount == nil || *r.ReceiveCount != 3 || r.VisibleUntil == nil {
		t.Errorf("third receive: receiveCount %v visibleUntil %v", r.ReceiveCount, r.VisibleUntil)
	}
	if e := events[2]; e.VisibleUntil == nil || !e.VisibleUntil.After(*events[1].VisibleUntil) {
		t.Errorf("extended: visibleUntil %v after received's %v", e.VisibleUntil, events[1].VisibleUntil)
	}
}

// An untraced queue's message has an empty history; a message that never
// was, or a queue that is not, is NotFound; tracing starts with the
// messages sent after it is turned on.
func TestHistoryOfUntracedAndUnknownMessages(t *testing.T) {
	svc, _, _ := newService(t)
	ctx := context.Background()
	if _, err := svc.Send(ctx, "default", "plain", service.MessageInput{Body: "b", MessageID: "u"}); err != nil {
		t.Fatal(err)
	}
	if got, events := historyOf(t, svc, "plain", "u"); got != "" || events == nil {
		t.Fatalf("untraced: %q (nil: %v)", got, events == nil)
	}
	for _, c := range [][2]string{{"plain", "never"}, {"nowhere", "u"}} {
		if _, err := svc.MessageHistory(ctx, "default", c[0], c[1]); service.KindOf(err) != service.KindNotFound {
			t.Errorf("%s/%s: %v, want not found", c[0], c[1], err)
		}
	}
	on := true
	if _, _, err := svc.PutQueue(ctx, "default", "plain", service.QueueSettings{Trace: &on}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Send(ctx, "default", "plain", service.MessageInput{Body: "b", MessageID: "t"}); err != nil {
		t.Fatal(err)
	}
	// A resend of a keyed message is a duplicate: its trace id takes no
	// part in its content hash.
	if res, err := svc.Send(ctx, "default", "plain", service.MessageInput{Body: "b", MessageID: "t"}); err != nil || !res.Duplicate {
		t.Fatalf("resend of t: %+v (%v), want a duplicate", res, err)
	}
	if _, err := svc.Send(ctx, "default", "plain", service.MessageInput{Body: "b"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := historyOf(t, svc, "plain", "t"); got != "sent@plain" {
		t.Fatalf("traced: %q", got)
	}
	if m, err := svc.GetMessage(ctx, "default", "plain", "t"); err != nil || len(m.Tags) != 0 {
		t.Fatalf("a traced message shows tags %v (%v): its trace id is reserved", m.Tags, err)
	}
	if got, _ := historyOf(t, svc, "plain", "u"); got != "" {
		t.Fatalf("sent before tracing: %q", got)
	}
	off := false
	if _, _, err := svc.PutQueue(ctx, "default", "plain", service.QueueSettings{Trace: &off}); err != nil {
		t.Fatal(err)
	}
	if q, err := svc.GetQueue(ctx, "default", "plain"); err != nil || q.Trace {
		t.Fatalf("trace off: %v (%v)", q.Trace, err)
	}
}

// Concurrent receivers and settles of one traced queue each record their
// own events: every message's history is whole and in order, with one
// received per delivery.
func TestHistoryUnderConcurrency(t *testing.T) {
	svc, _, _ := newService(t)
	ctx := context.Background()
	on := true
	if _, _, err := svc.PutQueue(ctx, "default", "c", service.QueueSettings{Trace: &on}); err != nil {
		t.Fatal(err)
	}
	const n = 200
	in := make([]service.MessageInput, n)
	for i := range in {
		in[i] = service.MessageInput{Body: "b", MessageID: fmt.Sprint("m", i)}
	}
	if _, err := svc.SendBatch(ctx, "default", "c", in); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for w := range 8 {
		go func() {
			wctx := service.WithKeyID(ctx, int64(w+1))
			for {
				msgs, err := svc.Receive(wctx, "default", "c", service.ReceiveOptions{WaitSeconds: new(0)})
				if err != nil || len(msgs) == 0 {
					errs <- err
					return
				}
				if _, err := svc.Ack(wctx, []string{msgs[0].ReceiptHandle}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		got, events := historyOf(t, svc, "c", fmt.Sprint("m", i))
		if got != "sent@c received@c acked@c" {
			t.Fatalf("m%d: %s", i, got)
		}
		if *events[1].KeyID != *events[2].KeyID || !slices.Contains([]int64{1, 2, 3, 4, 5, 6, 7, 8}, *events[1].KeyID) {
			t.Fatalf("m%d: received by key %d, acked by %d", i, *events[1].KeyID, *events[2].KeyID)
		}
	}
}

// The SQL API's calls go through the same functions: their events are
// recorded too, without a key.
func TestHistoryOfSQLAPICalls(t *testing.T) {
	svc, _, pool := newService(t)
	ctx := context.Background()
	on := true
	if _, _, err := svc.PutQueue(ctx, "default", "s", service.QueueSettings{Trace: &on}); err != nil {
		t.Fatal(err)
	}
	_, err := pool.Exec(ctx, `SELECT skipq.send('s', 'body'::text, message_id => 'x')`)
	if err != nil {
		t.Fatal(err)
	}
	var handle string
	if err := pool.QueryRow(ctx, `SELECT receipt_handle FROM skipq.receive('s')`).Scan(&handle); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `SELECT skipq.ack($1::text)`, handle); err != nil {
		t.Fatal(err)
	}
	got, events := historyOf(t, svc, "s", "x")
	if got != "sent@s received@s acked@s" {
		t.Fatalf("history: %s", got)
	}
	for _, e := range events {
		if e.KeyID != nil {
			t.Errorf("%s: keyId %d", e.Type, *e.KeyID)
		}
	}
}

// A FIFO queue's claims (skipq.message_claim_grouped, leasing and autoAck)
// record their events as the standard ones do.
func TestHistoryOfFIFOMessages(t *testing.T) {
	svc, _, _ := newService(t)
	ctx := context.Background()
	on := true
	if _, _, err := svc.PutQueue(ctx, "default", "f", service.QueueSettings{Trace: &on, FIFO: &on}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := svc.Send(ctx, "default", "f", service.MessageInput{Body: "b", MessageID: id, GroupID: "g-" + id}); err != nil {
			t.Fatal(err)
		}
	}
	m := receiveOne(t, svc, ctx, "f")
	if _, err := svc.Ack(ctx, []string{m.ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	msgs, err := svc.Receive(ctx, "default", "f", service.ReceiveOptions{AutoAck: true, WaitSeconds: new(0)})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("autoAck receive: %v %v", msgs, err)
	}
	for _, id := range []string{"a", "b"} {
		if got, _ := historyOf(t, svc, "f", id); got != "sent@f received@f acked@f" {
			t.Errorf("%s: %s", id, got)
		}
	}
}
