package kubemq_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/kubemq/kubemqpb"
	"github.com/skipq/skipq/internal/node"
	"github.com/skipq/skipq/internal/testport"
	"github.com/skipq/skipq/wire"
)

func TestQueuesUpstream(t *testing.T) {
	e := newNode(t)
	up, err := e.kq.QueuesUpstream(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	reqs := []*kubemqpb.QueuesUpstreamRequest{
		{RequestID: "r1", Messages: []*kubemqpb.QueueMessage{msg("up", "1"), msg("up", "2")}},
		{RequestID: "r2", Messages: []*kubemqpb.QueueMessage{msg("up", "3")}},
		{RequestID: "r3"},
	}
	for _, r := range reqs {
		if err := up.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	answers := map[string]*kubemqpb.QueuesUpstreamResponse{}
	for range reqs {
		r, err := up.Recv()
		if err != nil {
			t.Fatal(err)
		}
		answers[r.GetRefRequestID()] = r
	}
	if r := answers["r1"]; len(r.GetResults()) != 2 || r.GetIsError() || r.GetResults()[1].GetIsError() {
		t.Fatalf("r1: %v", r)
	}
	if r := answers["r2"]; len(r.GetResults()) != 1 || r.GetResults()[0].GetSentAt() == 0 {
		t.Fatalf("r2: %v", r)
	}
	if r := answers["r3"]; !r.GetIsError() {
		t.Fatalf("an empty request: %v", r)
	}
	if err := up.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := up.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the client's end: %v", err)
	}
	if n := len(e.pull(t, "up", 10, false).GetMessages()); n != 3 {
		t.Fatalf("pulled %d", n)
	}
}

// API keys as over HTTP: the raw token (as the SDKs send it) or Bearer,
// roles, tenants; Ping needs none.
func TestAuth(t *testing.T) {
	e := newNode(t, func(c *node.Config) { c.Auth = "required" })
	pool, err := db.NewPool(context.Background(), e.DB, db.PoolOptions{MaxConns: 2, ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	keys := auth.New(pool, 0)
	key := func(tenant, role string) string {
		_, secret, err := keys.Create(context.Background(), tenant, role, tenant+"-"+role)
		if err != nil {
			t.Fatal(err)
		}
		return secret
	}
	writer, reader, other := key("acme", "write"), key("acme", "read"), key("globex", "write")

	if _, err := e.kq.Ping(ctx(t), &kubemqpb.Empty{}); err != nil {
		t.Fatalf("ping without a key: %v", err)
	}
	_, err = e.kq.SendQueueMessage(ctx(t), msg("secure", "x"))
	wantCode(t, err, codes.Unauthenticated)
	_, err = e.kq.SendQueueMessage(withToken(ctx(t), "sk_unknown"), msg("secure", "x"))
	wantCode(t, err, codes.Unauthenticated)
	if r, err := e.kq.SendQueueMessage(withToken(ctx(t), writer), msg("secure", "x")); err != nil || r.GetIsError() {
		t.Fatalf("raw token: %v %v", r, err)
	}
	if r, err := e.kq.SendQueueMessage(withToken(ctx(t), "Bearer "+writer), msg("secure", "y")); err != nil || r.GetIsError() {
		t.Fatalf("Bearer token: %v %v", r, err)
	}
	_, err = e.kq.SendQueueMessage(withToken(ctx(t), reader), msg("secure", "x"))
	wantCode(t, err, codes.PermissionDenied)
	// A read key may peek, not pull.
	peek := &kubemqpb.ReceiveQueueMessagesRequest{ClientID: clientID, Channel: "secure", MaxNumberOfMessages: 10, IsPeak: true}
	if r, err := e.kq.ReceiveQueueMessages(withToken(ctx(t), reader), peek); err != nil || len(r.GetMessages()) != 2 {
		t.Fatalf("peek with a read key: %v %v", r, err)
	}
	pull := &kubemqpb.ReceiveQueueMessagesRequest{ClientID: clientID, Channel: "secure", MaxNumberOfMessages: 10}
	_, err = e.kq.ReceiveQueueMessages(withToken(ctx(t), reader), pull)
	wantCode(t, err, codes.PermissionDenied)
	s, err := e.kq.QueuesDownstream(withToken(ctx(t), reader))
	if err == nil {
		_, err = s.Recv()
	}
	wantCode(t, err, codes.PermissionDenied)
	// Another tenant sees its own queue of that name: empty.
	if r, err := e.kq.ReceiveQueueMessages(withToken(ctx(t), other), pull); err != nil || len(r.GetMessages()) != 0 {
		t.Fatalf("another tenant's pull: %v %v", r, err)
	}
	if r, err := e.kq.ReceiveQueueMessages(withToken(ctx(t), writer), pull); err != nil || len(r.GetMessages()) != 2 {
		t.Fatalf("the tenant's pull: %v %v", r, err)
	}
}

func TestRateLimit(t *testing.T) {
	e := newNode(t, func(c *node.Config) { c.RateLimit = 0.5; c.RateBurst = 2 })
	for range 2 {
		e.send(t, msg("limited", "x"))
	}
	_, err := e.kq.SendQueueMessage(ctx(t), msg("limited", "x"))
	wantCode(t, err, codes.ResourceExhausted)
	// The bucket is the HTTP API's too.
	e.http(t, "POST", "/v1/queues/limited/messages", map[string]any{"body": "x"}, 429, nil)
}

// A message sent over KubeMQ is received over HTTP and SQS with the same
// body, metadata and tags; one sent over HTTP arrives over KubeMQ with its
// sequence and nanosecond times.
func TestInterop(t *testing.T) {
	masterKey := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	e := newNode(t, func(c *node.Config) { c.SQS.MasterKey = masterKey })
	binary := []byte{0, 1, 2, 0xff}
	e.send(t, &kubemqpb.QueueMessage{ClientID: clientID, Channel: "x", Body: []byte("héllo"), Metadata: "meta",
		Tags: map[string]string{"k": "v"}})
	e.send(t, &kubemqpb.QueueMessage{ClientID: clientID, Channel: "x", Body: binary})
	var got struct{ Messages []wire.Message }
	e.http(t, "POST", "/v1/queues/x/messages/receive", map[string]any{"maxMessages": 10, "autoAck": true}, 200, &got)
	if len(got.Messages) != 2 {
		t.Fatalf("HTTP receive: %+v", got)
	}
	m := got.Messages[0]
	if m.Body != "héllo" || m.BodyEncoding != "text" || m.Metadata != "meta" || m.Tags["k"] != "v" || m.ClientID != clientID {
		t.Fatalf("over HTTP: %+v", m)
	}
	if b, _ := base64.StdEncoding.DecodeString(got.Messages[1].Body); got.Messages[1].BodyEncoding != "base64" || string(b) != string(binary) {
		t.Fatalf("binary body over HTTP: %+v", got.Messages[1])
	}

	e.send(t, &kubemqpb.QueueMessage{ClientID: clientID, Channel: "x", Body: []byte("to sqs"), Tags: map[string]string{"k": "v"}})
	c := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(e.URL),
		Credentials: credentials.NewStaticCredentialsProvider("any", "any", "")})
	qurl, err := c.GetQueueUrl(ctx(t), &sqs.GetQueueUrlInput{QueueName: aws.String("x")})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: qurl.QueueUrl, MessageAttributeNames: []string{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Messages) != 1 || *r.Messages[0].Body != "to sqs" || *r.Messages[0].MessageAttributes["k"].StringValue != "v" {
		t.Fatalf("over SQS: %+v", r.Messages)
	}
	_, _ = c.DeleteMessage(ctx(t), &sqs.DeleteMessageInput{QueueUrl: qurl.QueueUrl, ReceiptHandle: r.Messages[0].ReceiptHandle})

	before := time.Now()
	var sent wire.SendResult
	e.http(t, "POST", "/v1/queues/x/messages", map[string]any{"body": "from http", "metadata": "m",
		"tags": map[string]string{"t": "1"}}, 201, &sent)
	pulled := e.pull(t, "x", 1, false).GetMessages()
	if len(pulled) != 1 {
		t.Fatalf("pulled %v", pulled)
	}
	a := pulled[0].GetAttributes()
	if string(pulled[0].GetBody()) != "from http" || pulled[0].GetMetadata() != "m" || pulled[0].GetTags()["t"] != "1" ||
		int64(a.GetSequence()) != sent.Sequence || pulled[0].GetMessageID() != sent.MessageID {
		t.Fatalf("over KubeMQ: %v (sent %+v)", pulled[0], sent)
	}
	nearNanos(t, "Timestamp", a.GetTimestamp(), before, 5*time.Second)
}

// A FIFO queue over KubeMQ: the group is the tag skipq.groupId.
func TestFIFOGroupTag(t *testing.T) {
	e := newNode(t)
	e.http(t, "PUT", "/v1/queues/f", map[string]any{"fifo": true}, 201, nil)
	for _, b := range []string{"a1", "a2"} {
		e.send(t, &kubemqpb.QueueMessage{ClientID: clientID, Channel: "f", Body: []byte(b), Tags: map[string]string{"skipq.groupId": "a"}})
	}
	r, err := e.kq.SendQueueMessage(ctx(t), msg("f", "no group"))
	if err != nil {
		t.Fatal(err)
	}
	wantInBand(t, r.GetIsError(), r.GetError(), "Error 131")
	d := e.downstream(t)
	first := d.get("f", 10, false)
	if len(first.GetMessages()) != 1 || string(first.GetMessages()[0].GetBody()) != "a1" ||
		first.GetMessages()[0].GetTags()["skipq.groupId"] != "a" {
		t.Fatalf("first Get of a FIFO group: %v", first)
	}
	if m := d.get("f", 10, false).GetMessages(); len(m) != 0 {
		t.Fatalf("the group's next message while a1 is in flight: %v", m)
	}
	d.settle(kubemqpb.QueuesDownstreamRequestType_AckAll, first.GetTransactionId())
	if m := d.get("f", 10, false).GetMessages(); len(m) != 1 || string(m[0].GetBody()) != "a2" {
		t.Fatalf("after a1's ack: %v", m)
	}
}

// With the database away every call answers UNAVAILABLE, quickly.
func TestDatabaseAway(t *testing.T) {
	dead := fmt.Sprintf("postgres://nobody@127.0.0.1:%d/none?sslmode=disable&connect_timeout=1", testport.Free(t, 23000))
	e := startOn(t, dead, func(c *node.Config) { c.Migrate = false })
	start := time.Now()
	_, err := e.kq.SendQueueMessage(ctx(t), msg("q", "x"))
	wantCode(t, err, codes.Unavailable)
	_, err = e.kq.ReceiveQueueMessages(ctx(t), &kubemqpb.ReceiveQueueMessagesRequest{ClientID: clientID, Channel: "q", MaxNumberOfMessages: 1})
	wantCode(t, err, codes.Unavailable)
	d, err := e.kq.QueuesDownstream(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Send(&kubemqpb.QueuesDownstreamRequest{ClientID: clientID, RequestTypeData: kubemqpb.QueuesDownstreamRequestType_Get,
		Channel: "q", MaxItems: 1, WaitTimeout: 1000}); err != nil {
		t.Fatal(err)
	}
	_, err = d.Recv()
	wantCode(t, err, codes.Unavailable)
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("answering UNAVAILABLE took %s", took)
	}
}

// rawCodec sends bytes already encoded, so that a test's client does not
// allocate while the node's allocations are counted.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// TestUnknownCallersAreRefusedUnread sends a 50 MiB message without a key
// and with an unknown one: the node answers UNAUTHENTICATED without reading
// it (the process allocates far less than the message while refusing it),
// and a known key's message past the node's budget of request bytes in
// flight is refused from its length.
func TestUnknownCallersAreRefusedUnread(t *testing.T) {
	e := newNode(t, func(c *node.Config) {
		c.Auth = "required"
		c.MaxRequestBytes = 1 << 20
		c.MaxInflightBytes = 60 << 20
	})
	pool, err := db.NewPool(context.Background(), e.DB, db.PoolOptions{MaxConns: 2, ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	_, writer, err := auth.New(pool, 0).Create(context.Background(), "acme", "write", "writer")
	if err != nil {
		t.Fatal(err)
	}
	encode := func(size int) []byte {
		b, err := proto.Marshal(&kubemqpb.QueueMessage{ClientID: clientID, Channel: "big", Body: make([]byte, size)})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	big := encode(50 << 20)
	send := func(c context.Context, req []byte) error {
		var resp []byte
		return e.conn.Invoke(c, kubemqpb.Kubemq_SendQueueMessage_FullMethodName, &req, &resp, grpc.ForceCodec(rawCodec{}))
	}
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"no key", ctx(t)}, {"unknown key", withToken(ctx(t), "sk_unknown")}} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		err := send(c.ctx, big)
		runtime.ReadMemStats(&after)
		wantCode(t, err, codes.Unauthenticated)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 20<<20 {
			t.Fatalf("%s: the process allocated %d MiB refusing a 50 MiB message", c.name, grew>>20)
		}
	}

	wantCode(t, send(withToken(ctx(t), writer), encode(61<<20)), codes.ResourceExhausted)
	if err := send(withToken(ctx(t), writer), encode(1<<20)); err != nil {
		t.Fatalf("a 1 MiB message within the budget: %v", err)
	}
}
