package kubemq_test

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/skipq/skipq/internal/kubemq/kubemqpb"
	"github.com/skipq/skipq/wire"
)

func TestPingAndUnservedRPCs(t *testing.T) {
	e := newNode(t)
	before := time.Now()
	p, err := e.kq.Ping(ctx(t), &kubemqpb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if p.GetHost() == "" || !regexp.MustCompile(`^2\.\d+\.\d+$`).MatchString(p.GetVersion()) {
		t.Fatalf("ping: %v", p)
	}
	// Unix seconds, not ms or ns.
	if s := p.GetServerStartTime(); s > before.Unix() || s < before.Unix()-120 {
		t.Fatalf("ServerStartTime %d, want Unix seconds shortly before %d", s, before.Unix())
	}
	if up := p.GetServerUpTimeSeconds(); up < 0 || up > time.Now().Unix()-p.GetServerStartTime()+1 {
		t.Fatalf("ServerUpTimeSeconds %d", up)
	}
	// Only the lower-case service exists.
	err = e.conn.Invoke(ctx(t), "/kubemq.Kubemq/Ping", &kubemqpb.Empty{}, &kubemqpb.PingResult{})
	wantCode(t, err, codes.Unimplemented)
	_, err = e.kq.SendEvent(ctx(t), &kubemqpb.Event{Channel: "e", ClientID: clientID})
	wantCode(t, err, codes.Unimplemented)
	if status.Convert(err).Message() != "skipq serves the KubeMQ queues API only" {
		t.Fatalf("unserved RPC: %v", err)
	}
	_, err = e.kq.SendRequest(ctx(t), &kubemqpb.Request{Channel: "commands", ClientID: clientID,
		RequestTypeData: kubemqpb.Request_Command})
	wantCode(t, err, codes.Unimplemented)
}

func TestSendPullPeek(t *testing.T) {
	e := newNode(t)
	t0 := time.Now()
	var sent []*kubemqpb.SendQueueMessageResult
	for i := range 3 {
		sent = append(sent, e.send(t, msg("q", fmt.Sprintf("m%d", i))))
	}
	r := sent[0]
	nearNanos(t, "SentAt", r.GetSentAt(), t0, 5*time.Second)
	if r.GetMessageID() == "" || r.GetExpirationAt() != 0 || r.GetDelayedTo() != 0 || r.GetRefChannel() != "" {
		t.Fatalf("send result %v", r)
	}
	own := e.send(t, &kubemqpb.QueueMessage{MessageID: "my-id", ClientID: clientID, Channel: "own", Metadata: "only metadata"})
	if own.GetMessageID() != "my-id" {
		t.Fatalf("given MessageID answered as %q", own.GetMessageID())
	}
	// A resend with the same MessageID (the Go SDK's retry after a
	// deadline) is stored once, and answered as the first send.
	resent := e.send(t, &kubemqpb.QueueMessage{MessageID: "my-id", ClientID: clientID, Channel: "own", Metadata: "only metadata"})
	if resent.GetSentAt() != own.GetSentAt() {
		t.Fatalf("resend answered %v, first send %v", resent, own)
	}
	if n := len(e.pull(t, "own", 10, false).GetMessages()); n != 1 {
		t.Fatalf("a resent MessageID was stored %d times", n)
	}

	peek := e.pull(t, "q", 10, true)
	again := e.pull(t, "q", 10, true)
	if len(peek.GetMessages()) != 3 || len(again.GetMessages()) != 3 || !peek.GetIsPeak() {
		t.Fatalf("peeks: %d, %d messages", len(peek.GetMessages()), len(again.GetMessages()))
	}
	got := e.pull(t, "q", 10, false)
	if got.GetMessagesReceived() != 3 || len(got.GetMessages()) != 3 {
		t.Fatalf("pull: %v", got)
	}
	var last uint64
	for i, m := range got.GetMessages() {
		a := m.GetAttributes()
		sum := md5.Sum(m.GetBody())
		if string(m.GetBody()) != fmt.Sprintf("m%d", i) || m.GetMessageID() != sent[i].GetMessageID() ||
			m.GetClientID() != clientID || m.GetChannel() != "q" || a.GetReceiveCount() != 1 ||
			a.GetSequence() <= last || a.GetSequence() > 1<<53 || a.GetMD5OfBody() != hex.EncodeToString(sum[:]) {
			t.Fatalf("message %d: %v", i, m)
		}
		nearNanos(t, "Timestamp", a.GetTimestamp(), t0, 5*time.Second)
		last = a.GetSequence()
	}
	if n := len(e.pull(t, "q", 10, false).GetMessages()); n != 0 {
		t.Fatalf("a pull takes its messages; a second pull got %d", n)
	}
}

func TestSendValidation(t *testing.T) {
	e := newNode(t)
	for _, c := range []struct {
		name string
		m    *kubemqpb.QueueMessage
		code string
	}{
		{"no client id", &kubemqpb.QueueMessage{Channel: "q", Body: []byte("x")}, "Error 101"},
		{"empty", &kubemqpb.QueueMessage{ClientID: clientID, Channel: "q"}, "Error 110"},
		{"space", msg("a b", "x"), "Error 120"},
		{"wildcard", msg("a.*", "x"), "Error 120"},
		{"trailing dot", msg("a.", "x"), "Error 120"},
		{"no channel", msg("", "x"), "Error 120"},
		{"expiration", withPolicy(msg("q", "x"), &kubemqpb.QueueMessagePolicy{ExpirationSeconds: 1209601}), "Error 133"},
		{"max receive count", withPolicy(msg("q", "x"), &kubemqpb.QueueMessagePolicy{MaxReceiveCount: -1}), "Error 134"},
		{"delay", withPolicy(msg("q", "x"), &kubemqpb.QueueMessagePolicy{DelaySeconds: 43201}), "Error 135"},
		{"dead-letter queue", withPolicy(msg("q", "x"), &kubemqpb.QueueMessagePolicy{MaxReceiveQueue: "x."}), "Error 120"},
		{"skipq refuses", &kubemqpb.QueueMessage{ClientID: clientID, Channel: "q", Body: []byte("x"),
			Tags: map[string]string{"skipq.other": "v"}}, "Error 131"},
	} {
		r, err := e.kq.SendQueueMessage(ctx(t), c.m)
		if err != nil {
			t.Fatalf("%s: %v (refusals are in-band)", c.name, err)
		}
		wantInBand(t, r.GetIsError(), r.GetError(), c.code)
		if r.GetSentAt() != 0 {
			t.Fatalf("%s: a refused send has SentAt %d", c.name, r.GetSentAt())
		}
	}
	// Topic, Partition and PartitionKey are accepted and ignored.
	r := e.send(t, &kubemqpb.QueueMessage{ClientID: clientID, Channel: "q", Body: []byte("x"), Topic: "t",
		Partition: 3, PartitionKey: "k"})
	if r.GetRefTopic() != "" || r.GetRefPartition() != 0 || r.GetRefHash() != "" {
		t.Fatalf("result %v", r)
	}
}

func withPolicy(m *kubemqpb.QueueMessage, p *kubemqpb.QueueMessagePolicy) *kubemqpb.QueueMessage {
	m.Policy = p
	return m
}

func TestBatch(t *testing.T) {
	e := newNode(t)
	b, err := e.kq.SendQueueMessagesBatch(ctx(t), &kubemqpb.QueueMessagesBatchRequest{BatchID: "b1",
		Messages: []*kubemqpb.QueueMessage{msg("b", "1"), msg("b b", "bad"), msg("other", "2"), msg("b", "3")}})
	if err != nil {
		t.Fatal(err)
	}
	if b.GetBatchID() != "b1" || len(b.GetResults()) != 4 {
		t.Fatalf("batch: %v", b)
	}
	for i, r := range b.GetResults() {
		if r.GetIsError() != (i == 1) {
			t.Fatalf("result %d: %v", i, r)
		}
	}
	if got := e.pull(t, "b", 10, false); len(got.GetMessages()) != 2 || string(got.GetMessages()[1].GetBody()) != "3" {
		t.Fatalf("channel b: %v", got)
	}
	// A message only skipq refuses, among good ones of its channel.
	refused := msg("b", "reserved tag")
	refused.Tags = map[string]string{"skipq.x": "v"}
	b, err = e.kq.SendQueueMessagesBatch(ctx(t), &kubemqpb.QueueMessagesBatchRequest{
		Messages: []*kubemqpb.QueueMessage{msg("b", "4"), refused, msg("b", "5")}})
	if err != nil {
		t.Fatal(err)
	}
	if r := b.GetResults(); len(r) != 3 || r[0].GetIsError() || !r[1].GetIsError() || r[2].GetIsError() {
		t.Fatalf("batch with a refused message: %v", b)
	}
	wantInBand(t, true, b.GetResults()[1].GetError(), "Error 131")
	if got := e.pull(t, "b", 10, false); len(got.GetMessages()) != 2 {
		t.Fatalf("channel b after the refusal: %v", got)
	}
	if got := e.pull(t, "other", 10, false); len(got.GetMessages()) != 1 {
		t.Fatalf("channel other: %v", got)
	}
	_, err = e.kq.SendQueueMessagesBatch(ctx(t), &kubemqpb.QueueMessagesBatchRequest{})
	wantCode(t, err, codes.InvalidArgument)
}

func TestPolicies(t *testing.T) {
	e := newNode(t)
	now := time.Now()
	r := e.send(t, withPolicy(msg("p", "x"), &kubemqpb.QueueMessagePolicy{ExpirationSeconds: 10, DelaySeconds: 5}))
	nearNanos(t, "DelayedTo", r.GetDelayedTo(), now.Add(5*time.Second), 3*time.Second)
	// The expiration clock starts after the delay.
	nearNanos(t, "ExpirationAt", r.GetExpirationAt(), now.Add(15*time.Second), 3*time.Second)

	e.send(t, withPolicy(msg("delayed", "x"), &kubemqpb.QueueMessagePolicy{DelaySeconds: 2}))
	if n := len(e.pull(t, "delayed", 1, false).GetMessages()); n != 0 {
		t.Fatalf("a delayed message was pulled at once (%d)", n)
	}
	time.Sleep(2 * time.Second)
	got := e.pull(t, "delayed", 1, false)
	if len(got.GetMessages()) != 1 || got.GetMessages()[0].GetAttributes().GetDelayedTo() != 0 {
		t.Fatalf("after the delay: %v", got)
	}

	e.send(t, withPolicy(msg("expiring", "x"), &kubemqpb.QueueMessagePolicy{ExpirationSeconds: 1}))
	time.Sleep(2 * time.Second)
	if n := len(e.pull(t, "expiring", 1, false).GetMessages()); n != 0 {
		t.Fatalf("an expired message was pulled (%d)", n)
	}
}

func TestPullAndAckAllLimits(t *testing.T) {
	e := newNode(t)
	for _, c := range []struct {
		max, wait int32
		code      string
	}{{1025, 1, "Error 122"}, {0, 1, "Error 122"}, {1, 3601, "Error 136"}, {1, -1, "Error 136"}} {
		r, err := e.kq.ReceiveQueueMessages(ctx(t), &kubemqpb.ReceiveQueueMessagesRequest{ClientID: clientID,
			Channel: "q", MaxNumberOfMessages: c.max, WaitTimeSeconds: c.wait})
		if err != nil {
			t.Fatal(err)
		}
		wantInBand(t, r.GetIsError(), r.GetError(), c.code)
	}
	r, err := e.kq.ReceiveQueueMessages(ctx(t), &kubemqpb.ReceiveQueueMessagesRequest{Channel: "q", MaxNumberOfMessages: 1})
	if err != nil {
		t.Fatal(err)
	}
	wantInBand(t, r.GetIsError(), r.GetError(), "Error 101")
	a, err := e.kq.AckAllQueueMessages(ctx(t), &kubemqpb.AckAllQueueMessagesRequest{ClientID: clientID,
		Channel: "q", WaitTimeSeconds: 3601})
	if err != nil {
		t.Fatal(err)
	}
	wantInBand(t, a.GetIsError(), a.GetError(), "Error 136")
}

func TestAckAll(t *testing.T) {
	e := newNode(t)
	for i := range 4 {
		e.send(t, msg("all", fmt.Sprint(i)))
	}
	e.send(t, withPolicy(msg("all", "later"), &kubemqpb.QueueMessagePolicy{DelaySeconds: 60}))
	start := time.Now()
	a, err := e.kq.AckAllQueueMessages(ctx(t), &kubemqpb.AckAllQueueMessagesRequest{RequestID: "r",
		ClientID: clientID, Channel: "all", WaitTimeSeconds: 5})
	if err != nil {
		t.Fatal(err)
	}
	if a.GetIsError() || a.GetAffectedMessages() != 4 || a.GetRequestID() != "r" {
		t.Fatalf("ackAll: %v", a)
	}
	if time.Since(start) > 3*time.Second {
		t.Fatalf("ackAll took %s: it answers at once, not after its wait", time.Since(start))
	}
	if n := len(e.pull(t, "all", 10, false).GetMessages()); n != 0 {
		t.Fatalf("after ackAll a pull got %d", n)
	}
	var q wire.Queue
	e.http(t, "GET", "/v1/queues/all", nil, 200, &q)
	if q.Stats == nil || q.Stats.Delayed != 1 {
		t.Fatalf("the delayed message must stay: %+v", q.Stats)
	}
	// A channel nobody sent to: nothing to remove.
	a, err = e.kq.AckAllQueueMessages(ctx(t), &kubemqpb.AckAllQueueMessagesRequest{ClientID: clientID, Channel: "none"})
	if err != nil || a.GetIsError() || a.GetAffectedMessages() != 0 {
		t.Fatalf("ackAll on a missing channel: %v %v", a, err)
	}
}

func TestQueuesInfoAndChannels(t *testing.T) {
	e := newNode(t)
	mgmt := func(meta string, tags map[string]string) *kubemqpb.Response {
		t.Helper()
		tags["channel_type"] = "queues"
		r, err := e.kq.SendRequest(ctx(t), &kubemqpb.Request{RequestID: "m", ClientID: clientID,
			Channel: "kubemq.cluster.internal.requests", RequestTypeData: kubemqpb.Request_Query, Metadata: meta, Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := mgmt("create-channel", map[string]string{"channel": "made"}); r.GetError() != "" || !r.GetExecuted() {
		t.Fatalf("create-channel: %v", r)
	}
	e.send(t, msg("info", "a"))
	e.send(t, msg("info", "b"))
	var list []map[string]any
	if err := json.Unmarshal(mgmt("list-channels", map[string]string{}).GetBody(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0]["name"] != "info" || list[1]["name"] != "made" || list[0]["type"] != "queues" {
		t.Fatalf("list-channels: %v", list)
	}
	info, err := e.kq.QueuesInfo(ctx(t), &kubemqpb.QueuesInfoRequest{RequestID: "i", QueueName: "info"})
	if err != nil {
		t.Fatal(err)
	}
	qs := info.GetInfo().GetQueues()
	if info.GetRefRequestID() != "i" || len(qs) != 1 || qs[0].GetName() != "info" || qs[0].GetMessages() != 2 || qs[0].GetWaiting() != 2 ||
		qs[0].GetBytes() != 2 || qs[0].GetFirstSequence() <= 0 || qs[0].GetLastSequence() != qs[0].GetFirstSequence()+1 {
		t.Fatalf("queues info: %v", info)
	}
	all, err := e.kq.QueuesInfo(ctx(t), &kubemqpb.QueuesInfoRequest{})
	if err != nil || all.GetInfo().GetTotalQueue() != 2 {
		t.Fatalf("all queues: %v %v", all, err)
	}
	missing, err := e.kq.QueuesInfo(ctx(t), &kubemqpb.QueuesInfoRequest{QueueName: "nope"})
	if err != nil || missing.GetInfo() == nil || len(missing.GetInfo().GetQueues()) != 0 {
		t.Fatalf("a missing queue: %v %v", missing, err)
	}
	if r := mgmt("delete-channel", map[string]string{"channel": "made"}); r.GetError() != "" {
		t.Fatalf("delete-channel: %v", r)
	}
	if r := mgmt("delete-channel", map[string]string{"channel": "made"}); !strings.Contains(r.GetError(), "does not exist") {
		t.Fatalf("deleting a missing channel: %v", r)
	}
}

// Requests with every field empty or out of range are answered (in-band,
// or with a status that names the caller's mistake), never INTERNAL.
func TestOddRequestsAreNeverInternal(t *testing.T) {
	e := newNode(t)
	notInternal := func(what string, err error) {
		t.Helper()
		if c := status.Code(err); c == codes.Internal || c == codes.Unknown {
			t.Fatalf("%s: %v", what, err)
		}
	}
	_, err := e.kq.SendQueueMessage(ctx(t), &kubemqpb.QueueMessage{})
	notInternal("empty send", err)
	_, err = e.kq.SendQueueMessage(ctx(t), &kubemqpb.QueueMessage{ClientID: "c", Channel: "q", Body: []byte{0xff, 0},
		Policy: &kubemqpb.QueueMessagePolicy{MaxReceiveQueue: "q"}, Attributes: &kubemqpb.QueueMessageAttributes{Sequence: 7}})
	notInternal("a queue its own dead-letter queue", err)
	_, err = e.kq.SendQueueMessagesBatch(ctx(t), &kubemqpb.QueueMessagesBatchRequest{Messages: []*kubemqpb.QueueMessage{{}, nil}})
	notInternal("batch of empty messages", err)
	_, err = e.kq.ReceiveQueueMessages(ctx(t), &kubemqpb.ReceiveQueueMessagesRequest{})
	notInternal("empty receive", err)
	_, err = e.kq.AckAllQueueMessages(ctx(t), &kubemqpb.AckAllQueueMessagesRequest{})
	notInternal("empty ackAll", err)
	_, err = e.kq.QueuesInfo(ctx(t), &kubemqpb.QueuesInfoRequest{QueueName: "a b"})
	notInternal("QueuesInfo of a bad name", err)
	_, err = e.kq.SendRequest(ctx(t), &kubemqpb.Request{})
	notInternal("empty request", err)

	d := e.downstream(t)
	for typ := range int32(13) {
		d.write(&kubemqpb.QueuesDownstreamRequest{RequestTypeData: kubemqpb.QueuesDownstreamRequestType(typ), SequenceRange: []int64{-1, 0}})
		switch kubemqpb.QueuesDownstreamRequestType(typ) {
		case kubemqpb.QueuesDownstreamRequestType_CloseByClient:
			continue // answers nothing
		}
		if r := d.read(); typ != int32(kubemqpb.QueuesDownstreamRequestType_TransactionStatus) && !r.GetIsError() {
			t.Fatalf("downstream request type %d with no fields: %v", typ, r)
		}
	}
	s := e.stream(t)
	r := s.do(&kubemqpb.StreamQueueMessagesRequest{StreamRequestTypeData: 99})
	wantInBand(t, r.GetIsError(), r.GetError(), "Error 132")
}
