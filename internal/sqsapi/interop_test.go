package sqsapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jackc/pgx/v5"

	"github.com/skipq/skipq/internal/node"
)

// native calls the native HTTP API.
func native(t *testing.T, method, url string, body any) (int, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, r)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// Messages are shared between the native, SQL and SQS APIs.
func TestInterop(t *testing.T) {
	n := newNode(t)
	c := client(t, n.URL, "x", "x")
	cx := ctx(t)
	q := createQueue(t, c, "shared", nil)

	// Native send with tags → SQS String attributes with AWS's MD5.
	if s, body := native(t, "POST", n.URL+"/v1/queues/shared/messages", map[string]any{"body": "msg",
		"tags": map[string]string{"Hello": "There"}}); s != 201 {
		t.Fatalf("native send: %d %v", s, body)
	}
	got := must(c.ReceiveMessage(cx, &sqs.ReceiveMessageInput{QueueUrl: &q, MessageAttributeNames: []string{"All"}}))
	if len(got.Messages) != 1 || *got.Messages[0].MD5OfMessageAttributes != "a311262e065454b75da111d535b8dacd" {
		t.Fatalf("native message over SQS: %+v", got.Messages)
	}
	// ...and its SQS handle settles it natively.
	if s, body := native(t, "POST", n.URL+"/v1/receipts/ack", map[string]any{"receiptHandle": *got.Messages[0].ReceiptHandle}); s != 200 {
		t.Fatalf("native ack of an SQS handle: %d %v", s, body)
	}

	// SQS send → native: body, tags mirror, clientId; the reserved tag
	// that carries the typed attributes stays hidden.
	sent := must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: str("from sqs"),
		MessageAttributes: map[string]types.MessageAttributeValue{"Foo": strAttr("Bar"),
			"n": {DataType: str("Number"), StringValue: str("1")}}}))
	s, msg := native(t, "GET", n.URL+"/v1/queues/shared/messages/"+*sent.MessageId, nil)
	tags, _ := msg["tags"].(map[string]any)
	if s != 200 || msg["body"] != "from sqs" || msg["clientId"] != "anonymous" || len(tags) != 1 || tags["Foo"] != "Bar" {
		t.Fatalf("SQS message natively: %d %v", s, msg)
	}
	// D5: the typed attributes, read-only.
	attrs, _ := msg["messageAttributes"].(map[string]any)
	num, _ := attrs["n"].(map[string]any)
	if len(attrs) != 2 || num["dataType"] != "Number" || num["stringValue"] != "1" {
		t.Fatalf("messageAttributes natively: %v", msg["messageAttributes"])
	}
	// A native handle deleted over SQS.
	_, recv := native(t, "POST", n.URL+"/v1/queues/shared/messages/receive", map[string]any{"waitSeconds": 0})
	msgs, _ := recv["messages"].([]any)
	if len(msgs) != 1 {
		t.Fatalf("native receive: %v", recv)
	}
	handle := msgs[0].(map[string]any)["receiptHandle"].(string)
	must(c.DeleteMessage(cx, &sqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: &handle}))
	if s, _ := native(t, "GET", n.URL+"/v1/queues/shared/messages/"+*sent.MessageId, nil); s != 404 {
		t.Fatalf("after an SQS delete of a native handle: %d", s)
	}

	// SQL skipq.send wakes an SQS long poll.
	woke := make(chan *sqs.ReceiveMessageOutput, 1)
	go func() {
		out, _ := c.ReceiveMessage(cx, &sqs.ReceiveMessageInput{QueueUrl: &q, WaitTimeSeconds: 20})
		woke <- out
	}()
	time.Sleep(200 * time.Millisecond)
	conn, err := pgx.Connect(context.Background(), n.DB)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "SELECT skipq.send('shared', 'from sql')"); err != nil {
		t.Fatal(err)
	}
	select {
	case out := <-woke:
		if out == nil || len(out.Messages) != 1 || *out.Messages[0].Body != "from sql" {
			t.Fatalf("woken by SQL: %+v", out)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("skipq.send did not wake the SQS long poll")
	}
}

// What real clients and old clients send.
func TestRobustness(t *testing.T) {
	n := newNode(t)
	cx := ctx(t)
	// A base endpoint with a path prefix: queue URLs keep it.
	c := client(t, n.URL+"/sqs", "x", "x")
	q := createQueue(t, c, "robust", nil)
	if q != n.URL+"/sqs/000000000000/robust" {
		t.Fatalf("queue URL %s", q)
	}
	for _, u := range []string{"https://sqs.eu-west-1.amazonaws.com/123456789012/robust", "robust"} {
		must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: str(u), MessageBody: str("x")}))
	}
	r := raw(t, n.URL, "SendMessage", map[string]any{"QueueUrl": q, "MessageBody": "x", "SomeFutureMember": true})
	if r.Status != 200 || r.Body["MD5OfMessageBody"] != "9dd4e461268c8034f5c8564e155c67a6" {
		t.Fatalf("unknown member: %d %s", r.Status, r.Raw)
	}
	raw(t, n.URL, "Nope", map[string]any{}).sqsError(t, 400, "UnknownOperationException", "InvalidAction")
	raw(t, n.URL, "AddPermission", map[string]any{}).sqsError(t, 400, "UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation")
	raw(t, n.URL, "SendMessage", "[1]").sqsError(t, 400, "SerializationException", "MalformedInput")
	raw(t, n.URL, "SendMessage", map[string]any{"QueueUrl": q}).sqsError(t, 400, "MissingRequiredParameterException", "MissingParameter")
	raw(t, n.URL, "SendMessage", map[string]any{"QueueUrl": q, "MessageBody": "a\u0000b"}).sqsError(t, 400, "InvalidMessageContents", "InvalidMessageContents")
	raw(t, n.URL, "SendMessage", map[string]any{"QueueUrl": "nope", "MessageBody": "x"}).sqsError(t, 400, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue")
	raw(t, n.URL, "ListQueues", "{}", "Content-Type", "text/plain").sqsError(t, 400, "SerializationException", "MalformedInput")
	raw(t, n.URL, "CreateQueue", map[string]any{"QueueName": "x.fifo"}).sqsError(t, 400, "InvalidParameterValueException", "InvalidParameterValue")

	// Old clients (query protocol) get a readable XML refusal.
	for _, req := range []*http.Request{
		must(http.NewRequest("POST", n.URL+"/", strings.NewReader("Action=ListQueues&Version=2012-11-05"))),
		must(http.NewRequest("GET", n.URL+"/?Action=ListQueues", nil)),
	} {
		if req.Method == "POST" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp := must(http.DefaultClient.Do(req))
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "text/xml" ||
			!strings.Contains(string(b), "<Code>InvalidAction</Code>") || !strings.Contains(string(b), "JSON 1.0") {
			t.Fatalf("%s query protocol: %d %s", req.Method, resp.StatusCode, b)
		}
	}
	// The native API is untouched: an unknown native route is its 404.
	if s, body := native(t, "GET", n.URL+"/v1/nope", nil); s != 404 || body["error"] == nil {
		t.Fatalf("native 404: %d %v", s, body)
	}
}

// X-Forwarded-Proto and X-Forwarded-Host make queue URLs only when
// SKIPQ_TRUST_PROXY is on and they come from a SKIPQ_TRUSTED_PROXIES proxy
// (the rule X-Forwarded-For follows).
func TestForwardedQueueURLs(t *testing.T) {
	for _, tc := range []struct {
		trusted, want string
	}{
		{"127.0.0.1/32", "https://q.example/000000000000/fw"},
		{"10.9.9.9", ""},
	} {
		n := newNode(t, func(c *node.Config) { c.SQS.TrustProxy = true; c.TrustedProxies = tc.trusted })
		r := raw(t, n.URL, "CreateQueue", map[string]any{"QueueName": "fw"},
			"X-Forwarded-Proto", "https", "X-Forwarded-Host", "q.example")
		want := tc.want
		if want == "" {
			want = n.URL + "/000000000000/fw"
		}
		if r.Status != 200 || r.Body["QueueUrl"] != want {
			t.Fatalf("trusted %s: %d %s, want %s", tc.trusted, r.Status, r.Raw, want)
		}
	}
}

// A ListDeadLetterSourceQueues NextToken that decodes to bytes no queue
// name holds (NUL, invalid UTF-8) is InvalidParameterValue, not a 500.
func TestListDeadLetterSourceQueuesRefusesForeignTokens(t *testing.T) {
	n := newNode(t)
	r := raw(t, n.URL, "CreateQueue", map[string]any{"QueueName": "dlq"})
	q, _ := r.Body["QueueUrl"].(string)
	for _, token := range []string{"AAAAAAAAAAAAAAAAAAAA", "__4"} {
		raw(t, n.URL, "ListDeadLetterSourceQueues", map[string]any{"QueueUrl": q, "NextToken": token}).
			sqsError(t, 400, "InvalidParameterValueException", "InvalidParameterValue")
	}
}

// Queue tags and attributes stored as given holding text Postgres cannot
// hold (NUL, found by the audit of text inputs) are refused
// (InvalidParameterValue, InvalidAttributeValue), not a 500, in TagQueue,
// SetQueueAttributes and CreateQueue; a refused CreateQueue creates
// nothing.
func TestQueueTagsAndAttributesRefuseNUL(t *testing.T) {
	n := newNode(t)
	r := raw(t, n.URL, "CreateQueue", map[string]any{"QueueName": "tagged"})
	q, _ := r.Body["QueueUrl"].(string)
	for _, tags := range []map[string]any{{"a": "b\x00"}, {"a\x00": "b"}} {
		raw(t, n.URL, "TagQueue", map[string]any{"QueueUrl": q, "Tags": tags}).
			sqsError(t, 400, "InvalidParameterValueException", "InvalidParameterValue")
		raw(t, n.URL, "CreateQueue", map[string]any{"QueueName": "other", "tags": tags}).
			sqsError(t, 400, "InvalidParameterValueException", "InvalidParameterValue")
	}
	// Attributes stored as given (Policy and the like), the same.
	for _, attr := range []string{"Policy", "RedriveAllowPolicy", "KmsMasterKeyId", "SqsManagedSseEnabled"} {
		attrs := map[string]any{attr: "a\x00"}
		raw(t, n.URL, "SetQueueAttributes", map[string]any{"QueueUrl": q, "Attributes": attrs}).
			sqsError(t, 400, "InvalidAttributeValue", "InvalidAttributeValue")
		raw(t, n.URL, "CreateQueue", map[string]any{"QueueName": "other", "Attributes": attrs}).
			sqsError(t, 400, "InvalidAttributeValue", "InvalidAttributeValue")
	}
	raw(t, n.URL, "GetQueueUrl", map[string]any{"QueueName": "other"}).
		sqsError(t, 400, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue")
}
