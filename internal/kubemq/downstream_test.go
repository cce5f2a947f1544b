package kubemq_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/kubemq/kubemqpb"
	"github.com/skipq/skipq/wire"
)

// downstream is a QueuesDownstream call driven as KubeMQ's Go SDK v2
// drives it: Gets with a request id, settlements naming only the
// transaction (no Channel), nothing awaited after a settlement.
type downstream struct {
	t      *testing.T
	s      kubemqpb.Kubemq_QueuesDownstreamClient
	cancel context.CancelFunc
}

func (e env) downstream(t *testing.T) *downstream {
	t.Helper()
	c, cancel := context.WithCancel(ctx(t))
	t.Cleanup(cancel)
	s, err := e.kq.QueuesDownstream(c)
	if err != nil {
		t.Fatal(err)
	}
	return &downstream{t: t, s: s, cancel: cancel}
}

func (d *downstream) write(r *kubemqpb.QueuesDownstreamRequest) {
	d.t.Helper()
	if r.ClientID == "" {
		r.ClientID = clientID
	}
	if err := d.s.Send(r); err != nil {
		d.t.Fatal(err)
	}
}

func (d *downstream) read() *kubemqpb.QueuesDownstreamResponse {
	d.t.Helper()
	r, err := d.s.Recv()
	if err != nil {
		d.t.Fatal(err)
	}
	return r
}

func (d *downstream) get(channel string, max int32, autoAck bool) *kubemqpb.QueuesDownstreamResponse {
	d.t.Helper()
	d.write(&kubemqpb.QueuesDownstreamRequest{RequestID: "get-" + channel, RequestTypeData: kubemqpb.QueuesDownstreamRequestType_Get,
		Channel: channel, MaxItems: max, WaitTimeout: 1000, AutoAck: autoAck})
	r := d.read()
	if r.GetRefRequestId() != "get-"+channel || r.GetRequestTypeData() != kubemqpb.QueuesDownstreamRequestType_Get {
		d.t.Fatalf("Get answered %v", r)
	}
	return r
}

func (d *downstream) settle(t kubemqpb.QueuesDownstreamRequestType, tx string, seqs ...int64) {
	d.t.Helper()
	d.write(&kubemqpb.QueuesDownstreamRequest{RequestTypeData: t, RefTransactionId: tx, SequenceRange: seqs})
}

// offsets asks for the transaction's unsettled sequences; the answer also
// shows that every settlement before it was taken without an error.
func (d *downstream) offsets(tx string) []int64 {
	d.t.Helper()
	d.settle(kubemqpb.QueuesDownstreamRequestType_ActiveOffsets, tx)
	r := d.read()
	if r.GetRequestTypeData() != kubemqpb.QueuesDownstreamRequestType_ActiveOffsets {
		d.t.Fatalf("ActiveOffsets answered %v", r)
	}
	if r.GetIsError() {
		return nil
	}
	return slices.Sorted(slices.Values(r.GetActiveOffsets()))
}

func seqs(msgs []*kubemqpb.QueueMessage) []int64 {
	var out []int64
	for _, m := range msgs {
		out = append(out, int64(m.GetAttributes().GetSequence()))
	}
	return out
}

func TestQueuesDownstream(t *testing.T) {
	e := newNode(t)
	for _, b := range []string{"a", "b", "c"} {
		e.send(t, msg("d", b))
	}
	d := e.downstream(t)
	got := d.get("d", 10, false)
	s := seqs(got.GetMessages())
	if got.GetTransactionId() == "" || len(s) != 3 || got.GetMessages()[0].GetAttributes().GetReceiveCount() != 1 {
		t.Fatalf("Get: %v", got)
	}
	tx := got.GetTransactionId()
	d.settle(kubemqpb.QueuesDownstreamRequestType_AckRange, tx, s[0])
	if o := d.offsets(tx); !slices.Equal(o, s[1:]) {
		t.Fatalf("active offsets %v, want %v", o, s[1:])
	}
	d.settle(kubemqpb.QueuesDownstreamRequestType_AckRange, tx, s[0])
	if r := d.read(); !r.GetIsError() || r.GetError() != "invalid ack sequence id "+strconv.FormatInt(s[0], 10) {
		t.Fatalf("acking a settled sequence: %v", r)
	}
	d.settle(kubemqpb.QueuesDownstreamRequestType_AckRange, tx)
	if r := d.read(); !r.GetIsError() {
		t.Fatalf("an empty range: %v", r)
	}
	d.settle(kubemqpb.QueuesDownstreamRequestType_AckAll, tx)
	d.settle(kubemqpb.QueuesDownstreamRequestType_AckAll, tx)
	if r := d.read(); !r.GetIsError() || r.GetError() != "transaction is completed or transaction id not found" {
		t.Fatalf("a second AckAll: %v", r)
	}
	d.settle(kubemqpb.QueuesDownstreamRequestType_TransactionStatus, tx)
	if r := d.read(); !r.GetTransactionComplete() {
		t.Fatalf("transaction status: %v", r)
	}
	if n := len(e.pull(t, "d", 10, true).GetMessages()); n != 0 {
		t.Fatalf("acked messages stayed (%d)", n)
	}

	// NAckAll: redelivered with ReceiveCount 2.
	e.send(t, msg("d", "n"))
	tx = d.get("d", 10, false).GetTransactionId()
	d.settle(kubemqpb.QueuesDownstreamRequestType_NAckAll, tx)
	again := d.get("d", 10, false)
	if len(again.GetMessages()) != 1 || again.GetMessages()[0].GetAttributes().GetReceiveCount() != 2 {
		t.Fatalf("after NAckAll: %v", again)
	}
	// ReQueueAll needs a channel; then the messages move, marked re-routed.
	d.settle(kubemqpb.QueuesDownstreamRequestType_ReQueueAll, again.GetTransactionId())
	if r := d.read(); !r.GetIsError() || r.GetError() != "cannot requeue messages with empty channel destination " {
		t.Fatalf("ReQueueAll without a channel: %v", r)
	}
	d.write(&kubemqpb.QueuesDownstreamRequest{RequestTypeData: kubemqpb.QueuesDownstreamRequestType_ReQueueAll,
		RefTransactionId: again.GetTransactionId(), ReQueueChannel: "d2"})
	moved := d.get("d2", 10, true).GetMessages()
	if len(moved) != 1 || !moved[0].GetAttributes().GetReRouted() || moved[0].GetAttributes().GetReRoutedFromQueue() != "d" ||
		moved[0].GetAttributes().GetReceiveCount() != 1 {
		t.Fatalf("requeued: %v", moved)
	}
	// AutoAck: delivered and gone.
	e.send(t, msg("d", "auto"))
	if m := d.get("d", 10, true).GetMessages(); len(m) != 1 {
		t.Fatalf("AutoAck Get: %v", m)
	}
	// An empty queue answers an empty Get after the wait.
	start := time.Now()
	if r := d.get("d", 10, false); len(r.GetMessages()) != 0 || r.GetIsError() || time.Since(start) < 900*time.Millisecond {
		t.Fatalf("empty Get after %s: %v", time.Since(start), r)
	}
	// Unknown transactions, unknown requests, and Get's limits.
	d.settle(kubemqpb.QueuesDownstreamRequestType_NAckRange, "nope", 1)
	if r := d.read(); r.GetError() != "transaction is completed or transaction id not found" {
		t.Fatalf("unknown transaction: %v", r)
	}
	d.settle(kubemqpb.QueuesDownstreamRequestType_PollRequestTypeUnknown, "")
	if r := d.read(); r.GetError() != "request unknown" {
		t.Fatalf("unknown request: %v", r)
	}
	for _, c := range []struct {
		max, wait int32
		code      string
	}{{0, 1000, "Error 139"}, {1025, 1000, "Error 139"}, {1, 0, "Error 140"}, {1, 999, "Error 140"}} {
		d.write(&kubemqpb.QueuesDownstreamRequest{RequestTypeData: kubemqpb.QueuesDownstreamRequestType_Get,
			Channel: "d", MaxItems: c.max, WaitTimeout: c.wait})
		r := d.read()
		wantInBand(t, r.GetIsError(), r.GetError(), c.code)
	}

	// CloseByClient releases the transaction's messages at once.
	e.send(t, msg("d", "close"))
	tx = d.get("d", 10, false).GetTransactionId()
	d.settle(kubemqpb.QueuesDownstreamRequestType_CloseByClient, tx)
	if m := d.get("d", 10, false).GetMessages(); len(m) != 1 || m[0].GetAttributes().GetReceiveCount() != 2 {
		t.Fatalf("after CloseByClient: %v", m)
	}
	// The end of the call releases what it holds.
	d.cancel()
	deadline := time.Now().Add(5 * time.Second)
	for len(e.pull(t, "d", 10, false).GetMessages()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the ended call's messages were not released")
		}
	}
}

// A transaction's messages stay held past the queue's visibility while
// the call lives: the node renews their leases.
func TestDownstreamHoldsWhileTheCallLives(t *testing.T) {
	e := newNode(t)
	e.http(t, "PUT", "/v1/queues/held", map[string]any{"visibilitySeconds": 1}, 201, nil)
	e.send(t, msg("held", "x"))
	d := e.downstream(t)
	got := d.get("held", 1, false)
	time.Sleep(3 * time.Second)
	if n := len(e.pull(t, "held", 10, true).GetMessages()); n != 0 {
		t.Fatalf("a held message became available (%d)", n)
	}
	var q wire.Queue
	e.http(t, "GET", "/v1/queues/held", nil, 200, &q)
	if q.Stats.InFlight != 1 {
		t.Fatalf("stats %+v", q.Stats)
	}
	d.settle(kubemqpb.QueuesDownstreamRequestType_AckAll, got.GetTransactionId())
	if o := d.offsets(got.GetTransactionId()); o != nil {
		t.Fatalf("after AckAll: %v", o)
	}
	e.http(t, "GET", "/v1/queues/held", nil, 200, &q)
	if q.Stats.InFlight != 0 || q.Stats.Available != 0 {
		t.Fatalf("after AckAll: %+v", q.Stats)
	}
}

// The seed's DLQ tutorial: MaxReceiveCount 3 and a dead-letter queue;
// three Get + NAckAll rounds; the message is then in the DLQ, re-routed
// from its queue, and read and acked there.
func TestDeadLetterTutorial(t *testing.T) {
	e := newNode(t)
	e.send(t, withPolicy(msg("orders", "order 42"), &kubemqpb.QueueMessagePolicy{MaxReceiveCount: 3, MaxReceiveQueue: "orders.dlq"}))
	d := e.downstream(t)
	for round := 1; round <= 3; round++ {
		got := d.get("orders", 1, false)
		if len(got.GetMessages()) != 1 || got.GetMessages()[0].GetAttributes().GetReceiveCount() != int32(round) {
			t.Fatalf("round %d: %v", round, got)
		}
		d.settle(kubemqpb.QueuesDownstreamRequestType_NAckAll, got.GetTransactionId())
	}
	if m := d.get("orders", 1, false).GetMessages(); len(m) != 0 {
		t.Fatalf("a 4th Get on the queue: %v", m)
	}
	dead := d.get("orders.dlq", 1, false)
	m := dead.GetMessages()
	if len(m) != 1 || string(m[0].GetBody()) != "order 42" || !m[0].GetAttributes().GetReRouted() ||
		m[0].GetAttributes().GetReRoutedFromQueue() != "orders" || m[0].GetAttributes().GetReceiveCount() != 1 {
		t.Fatalf("in the DLQ: %v", m)
	}
	d.settle(kubemqpb.QueuesDownstreamRequestType_AckAll, dead.GetTransactionId())
	if o := d.offsets(dead.GetTransactionId()); o != nil {
		t.Fatalf("after AckAll: %v", o)
	}
	if n := len(e.pull(t, "orders.dlq", 10, true).GetMessages()); n != 0 {
		t.Fatalf("the DLQ still holds %d", n)
	}

	// MaxReceiveCount 1 without a dead-letter queue: one nack discards it.
	e.send(t, withPolicy(msg("once", "x"), &kubemqpb.QueueMessagePolicy{MaxReceiveCount: 1}))
	once := d.get("once", 1, false)
	d.settle(kubemqpb.QueuesDownstreamRequestType_NAckAll, once.GetTransactionId())
	if m := d.get("once", 1, false).GetMessages(); len(m) != 0 {
		t.Fatalf("a message past its last delivery came back: %v", m)
	}
}
