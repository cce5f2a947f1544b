package sqsapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// receiveAll receives up to 10 messages with every system attribute.
func receiveAll(t *testing.T, c *sqs.Client, q string, max int32) []types.Message {
	t.Helper()
	out := must(c.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: &q, MaxNumberOfMessages: max,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}}))
	return out.Messages
}

func bodies(msgs []types.Message) string {
	var out []string
	for _, m := range msgs {
		out = append(out, *m.Body)
	}
	return fmt.Sprint(out)
}

// docs/DESIGN.md#the-sqs-endpoint (D6): a .fifo queue is a native FIFO queue; order per group,
// one batch in flight per group, SequenceNumber, the FIFO attributes.
func TestFIFOOrderAndGroups(t *testing.T) {
	n := newNode(t)
	c := client(t, n.URL, "x", "x")
	cx := ctx(t)
	q := createQueue(t, c, "orders.fifo", map[string]string{"FifoQueue": "true"})

	attrs := must(c.GetQueueAttributes(cx, &sqs.GetQueueAttributesInput{QueueUrl: &q,
		AttributeNames: []types.QueueAttributeName{"All"}})).Attributes
	if attrs["FifoQueue"] != "true" || attrs["ContentBasedDeduplication"] != "false" ||
		attrs["DeduplicationScope"] != "queue" || attrs["FifoThroughputLimit"] != "perQueue" {
		t.Fatalf("FIFO attributes: %v", attrs)
	}
	s, native := native(t, "GET", n.URL+"/v1/queues/orders.fifo", nil)
	if s != 200 || native["fifo"] != true {
		t.Fatalf("native view of a .fifo queue: %d %v", s, native)
	}

	var lastSeq uint64
	for i, g := range []string{"A", "A", "B", "A", "B"} {
		out := must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: str(fmt.Sprintf("%s%d", g, i)),
			MessageGroupId: str(g), MessageDeduplicationId: str(fmt.Sprint("d", i))}))
		seq, err := strconv.ParseUint(aws.ToString(out.SequenceNumber), 10, 64)
		if err != nil || seq <= lastSeq {
			t.Fatalf("SequenceNumber %v after %d", out.SequenceNumber, lastSeq)
		}
		lastSeq = seq
	}
	// SQS fills a receive from one group first; the group is then locked.
	first := receiveAll(t, c, q, 10)
	if got := bodies(first); got != "[A0 A1 A3 B2 B4]" {
		t.Fatalf("first receive %s", got)
	}
	m := first[0]
	if m.Attributes["MessageGroupId"] != "A" || m.Attributes["MessageDeduplicationId"] != "d0" ||
		m.Attributes["SequenceNumber"] == "" || m.Attributes["ApproximateReceiveCount"] != "1" {
		t.Fatalf("FIFO receive attributes: %v", m.Attributes)
	}
	if again := receiveAll(t, c, q, 10); len(again) != 0 {
		t.Fatalf("groups in flight, yet received %s", bodies(again))
	}
	// Settling group B's batch frees B only.
	for _, m := range first[3:] {
		must(c.DeleteMessage(cx, &sqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: m.ReceiptHandle}))
	}
	must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: str("B5"), MessageGroupId: str("B"),
		MessageDeduplicationId: str("d5")}))
	if got := bodies(receiveAll(t, c, q, 10)); got != "[B5]" {
		t.Fatalf("after B settled: %s", got)
	}
	// Visibility 0 on A's head gives A back, in order.
	must(c.ChangeMessageVisibility(cx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &q, ReceiptHandle: first[0].ReceiptHandle,
		VisibilityTimeout: 0}))
	must(c.ChangeMessageVisibility(cx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &q, ReceiptHandle: first[1].ReceiptHandle,
		VisibilityTimeout: 0}))
	must(c.ChangeMessageVisibility(cx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &q, ReceiptHandle: first[2].ReceiptHandle,
		VisibilityTimeout: 0}))
	if got := bodies(receiveAll(t, c, q, 2)); got != "[A0 A1]" {
		t.Fatalf("A again: %s", got)
	}
	// D4 on a FIFO queue: a receive with visibility 0 leaves its group
	// receivable, the same message first.
	must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: str("C6"), MessageGroupId: str("C"),
		MessageDeduplicationId: str("d6")}))
	for want := range 2 {
		r := raw(t, n.URL, "ReceiveMessage", map[string]any{"QueueUrl": q, "VisibilityTimeout": 0, "AttributeNames": []string{"All"}})
		msgs, _ := r.Body["Messages"].([]any)
		if len(msgs) != 1 || msgs[0].(map[string]any)["Body"] != "C6" ||
			msgs[0].(map[string]any)["Attributes"].(map[string]any)["ApproximateReceiveCount"] != fmt.Sprint(want+1) {
			t.Fatalf("visibility 0, delivery %d: %s", want+1, r.Raw)
		}
	}
}

// docs/DESIGN.md#the-sqs-endpoint (D6): deduplication by MessageDeduplicationId (other content is
// still a duplicate, not an error) and by content.
func TestFIFODeduplication(t *testing.T) {
	n := newNode(t)
	c := client(t, n.URL, "x", "x")
	cx := ctx(t)
	q := createQueue(t, c, "dedup.fifo", map[string]string{"FifoQueue": "true"})
	one := must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: str("one"), MessageGroupId: str("g"),
		MessageDeduplicationId: str("k#1")}))
	dup := must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: str("other body"), MessageGroupId: str("g"),
		MessageDeduplicationId: str("k#1")}))
	if *dup.MessageId != *one.MessageId || *dup.SequenceNumber != *one.SequenceNumber {
		t.Fatalf("duplicate answered %s/%s, first %s/%s", *dup.MessageId, *dup.SequenceNumber, *one.MessageId, *one.SequenceNumber)
	}
	// A batch whose entries repeat an id: each is answered, one is stored.
	batch := must(c.SendMessageBatch(cx, &sqs.SendMessageBatchInput{QueueUrl: &q, Entries: []types.SendMessageBatchRequestEntry{
		{Id: str("a"), MessageBody: str("two"), MessageGroupId: str("g"), MessageDeduplicationId: str("k#2")},
		{Id: str("b"), MessageBody: str("two again"), MessageGroupId: str("g"), MessageDeduplicationId: str("k#2")},
		{Id: str("c"), MessageBody: str("one"), MessageGroupId: str("g"), MessageDeduplicationId: str("k#1")},
	}}))
	if len(batch.Successful) != 3 || len(batch.Failed) != 0 || *batch.Successful[0].MessageId != *batch.Successful[1].MessageId ||
		*batch.Successful[2].MessageId != *one.MessageId {
		t.Fatalf("batch with duplicates: %+v", batch)
	}
	// The dedup id is a key space of its own: a native messageId of the
	// same value is another message.
	if s, body := native(t, "POST", n.URL+"/v1/queues/dedup.fifo/messages", map[string]any{"body": "native",
		"messageId": "k3", "groupId": "g"}); s != 201 {
		t.Fatalf("native send: %d %v", s, body)
	}
	must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: str("sqs k3"), MessageGroupId: str("g"),
		MessageDeduplicationId: str("k3")}))
	got := receiveAll(t, c, q, 10)
	if bodies(got) != "[one two native sqs k3]" || got[2].Attributes["MessageDeduplicationId"] != "k3" {
		t.Fatalf("stored: %s %v", bodies(got), got[2].Attributes)
	}

	// Content-based: the body's SHA-256, shared with native senders.
	cq := createQueue(t, c, "content.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	a := must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &cq, MessageBody: str("same"), MessageGroupId: str("g1")}))
	b := must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &cq, MessageBody: str("same"), MessageGroupId: str("g2"),
		MessageAttributes: map[string]types.MessageAttributeValue{"x": strAttr("y")}}))
	s, nat := native(t, "POST", n.URL+"/v1/queues/content.fifo/messages", map[string]any{"body": "same", "groupId": "g3"})
	if *a.MessageId != *b.MessageId || s != 200 || nat["duplicate"] != true || nat["messageId"] != *a.MessageId {
		t.Fatalf("content dedup: %s %s, native %d %v", *a.MessageId, *b.MessageId, s, nat)
	}
	// An explicit id overrides the content.
	must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &cq, MessageBody: str("same"), MessageGroupId: str("g1"),
		MessageDeduplicationId: str("explicit")}))
	got = receiveAll(t, c, cq, 10)
	sum := sha256.Sum256([]byte("same"))
	if bodies(got) != "[same same]" || got[0].Attributes["MessageDeduplicationId"] != hex.EncodeToString(sum[:]) ||
		got[1].Attributes["MessageDeduplicationId"] != "explicit" {
		t.Fatalf("content queue: %s %v", bodies(got), got)
	}

	// DeduplicationScope messageGroup: the same id in two groups is two messages.
	gq := createQueue(t, c, "scoped.fifo", map[string]string{"FifoQueue": "true", "DeduplicationScope": "messageGroup",
		"FifoThroughputLimit": "perMessageGroupId"})
	for _, g := range []string{"g1", "g2", "g1"} {
		must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &gq, MessageBody: str(g), MessageGroupId: str(g),
			MessageDeduplicationId: str("same")}))
	}
	if got := bodies(receiveAll(t, c, gq, 10)); got != "[g1 g2]" {
		t.Fatalf("group-scoped dedup: %s", got)
	}
}

// A native FIFO queue (any name) reached over SQS, and messages crossing
// the two APIs with their groups.
func TestFIFONativeInterop(t *testing.T) {
	n := newNode(t)
	c := client(t, n.URL, "x", "x")
	cx := ctx(t)
	if s, body := native(t, "PUT", n.URL+"/v1/queues/jobs", map[string]any{"fifo": true}); s != 201 {
		t.Fatalf("native FIFO queue: %d %v", s, body)
	}
	q := must(c.GetQueueUrl(cx, &sqs.GetQueueUrlInput{QueueName: str("jobs")})).QueueUrl
	if s, body := native(t, "POST", n.URL+"/v1/queues/jobs/messages", map[string]any{"body": "n1", "groupId": "g",
		"messageId": "native-1"}); s != 201 {
		t.Fatalf("native send: %d %v", s, body)
	}
	// Without a deduplication id and content-based deduplication, SQS refuses.
	_, err := c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: str("s1"), MessageGroupId: str("g")})
	if apiCode(t, err) != "InvalidParameterValue" {
		t.Fatalf("no deduplication id: %v", err)
	}
	must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: str("s1"), MessageGroupId: str("g"),
		MessageDeduplicationId: str("s1")}))
	must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: str("odd"), MessageGroupId: str("user/42#x"),
		MessageDeduplicationId: str("odd")}))
	got := receiveAll(t, c, *q, 10)
	if bodies(got) != "[n1 s1 odd]" || got[0].Attributes["MessageGroupId"] != "g" ||
		got[0].Attributes["MessageDeduplicationId"] != "native-1" || got[2].Attributes["MessageGroupId"] != "user/42#x" {
		t.Fatalf("native FIFO over SQS: %s %v", bodies(got), got)
	}
	for _, m := range got {
		must(c.DeleteMessage(cx, &sqs.DeleteMessageInput{QueueUrl: q, ReceiptHandle: m.ReceiptHandle}))
	}
	must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: str("to native"), MessageGroupId: str("h"),
		MessageDeduplicationId: str("t")}))
	_, recv := native(t, "POST", n.URL+"/v1/queues/jobs/messages/receive", map[string]any{"waitSeconds": 0})
	msgs, _ := recv["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["groupId"] != "h" {
		t.Fatalf("SQS FIFO message natively: %v", recv)
	}
}

// The FIFO errors of docs/DESIGN.md#the-sqs-endpoint (D6) and the naming rules.
func TestFIFOErrors(t *testing.T) {
	n := newNode(t)
	c := client(t, n.URL, "x", "x")
	cx := ctx(t)
	std := createQueue(t, c, "plain", nil)
	q := createQueue(t, c, "e.fifo", map[string]string{"FifoQueue": "true"})
	for _, tc := range []struct {
		name string
		in   sqs.CreateQueueInput
	}{
		{"fifo suffix on a standard queue", sqs.CreateQueueInput{QueueName: str("x.fifo")}},
		{"FifoQueue without the suffix", sqs.CreateQueueInput{QueueName: str("x"), Attributes: map[string]string{"FifoQueue": "true"}}},
		{"FifoQueue false with the suffix", sqs.CreateQueueInput{QueueName: str("y.fifo"), Attributes: map[string]string{"FifoQueue": "false"}}},
		{"FIFO attribute on a standard queue", sqs.CreateQueueInput{QueueName: str("z"), Attributes: map[string]string{"ContentBasedDeduplication": "true"}}},
		{"bad DeduplicationScope", sqs.CreateQueueInput{QueueName: str("w.fifo"), Attributes: map[string]string{"FifoQueue": "true", "DeduplicationScope": "x"}}},
		{"standard DLQ of a FIFO queue", sqs.CreateQueueInput{QueueName: str("v.fifo"), Attributes: map[string]string{"FifoQueue": "true",
			"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:plain","maxReceiveCount":3}`}}},
	} {
		_, err := c.CreateQueue(cx, &tc.in)
		if code := apiCode(t, err); code != "InvalidParameterValue" && code != "InvalidAttributeName" && code != "InvalidAttributeValue" {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// Type is fixed; an existing queue of the other type is another queue.
	_, err := c.SetQueueAttributes(cx, &sqs.SetQueueAttributesInput{QueueUrl: &q, Attributes: map[string]string{"FifoQueue": "false"}})
	if apiCode(t, err) != "InvalidAttributeValue" {
		t.Errorf("changing FifoQueue: %v", err)
	}
	_, err = c.CreateQueue(cx, &sqs.CreateQueueInput{QueueName: str("e.fifo"), Attributes: map[string]string{"FifoQueue": "true",
		"ContentBasedDeduplication": "true"}})
	var exists *types.QueueNameExists
	if !errors.As(err, &exists) {
		t.Errorf("re-create with other FIFO attributes: %v", err)
	}
	must(c.SetQueueAttributes(cx, &sqs.SetQueueAttributesInput{QueueUrl: &q, Attributes: map[string]string{"ContentBasedDeduplication": "true"}}))

	for _, tc := range []struct {
		name, code string
		in         sqs.SendMessageInput
	}{
		{"missing MessageGroupId", "MissingParameter", sqs.SendMessageInput{QueueUrl: &q, MessageBody: str("x")}},
		{"per-message delay", "InvalidParameterValue", sqs.SendMessageInput{QueueUrl: &q, MessageBody: str("x"),
			MessageGroupId: str("g"), DelaySeconds: 5}},
		{"long MessageGroupId", "InvalidParameterValue", sqs.SendMessageInput{QueueUrl: &q, MessageBody: str("x"),
			MessageGroupId: str(string(make([]byte, 129)))}},
		{"MessageDeduplicationId on a standard queue", "InvalidParameterValue", sqs.SendMessageInput{QueueUrl: &std,
			MessageBody: str("x"), MessageDeduplicationId: str("d")}},
	} {
		if _, err := c.SendMessage(cx, &tc.in); apiCode(t, err) != tc.code {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// A batch reports its bad entries alone.
	out := must(c.SendMessageBatch(cx, &sqs.SendMessageBatchInput{QueueUrl: &q, Entries: []types.SendMessageBatchRequestEntry{
		{Id: str("ok"), MessageBody: str("x"), MessageGroupId: str("g")},
		{Id: str("bad"), MessageBody: str("x")},
	}}))
	if len(out.Successful) != 1 || out.Successful[0].SequenceNumber == nil || len(out.Failed) != 1 ||
		*out.Failed[0].Code != "MissingParameter" {
		t.Fatalf("batch: %+v", out)
	}
	// A standard queue keeps a MessageGroupId for its receivers.
	must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &std, MessageBody: str("x"), MessageGroupId: str("fair")}))
	if m := receiveAll(t, c, std, 1); len(m) != 1 || m[0].Attributes["MessageGroupId"] != "fair" || m[0].Attributes["SequenceNumber"] != "" {
		t.Fatalf("standard queue with a group: %v", m)
	}
}

// docs/DESIGN.md#the-sqs-endpoint (D6): a retried ReceiveRequestAttemptId gets the same messages
// and handles while they are in flight; standard queues ignore it.
func TestFIFOReceiveRequestAttemptId(t *testing.T) {
	n := newNode(t)
	c := client(t, n.URL, "x", "x")
	cx := ctx(t)
	q := createQueue(t, c, "attempts.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	for _, b := range []string{"a", "b", "c"} {
		must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: str(b), MessageGroupId: str("g")}))
	}
	recv := func(attempt string) []types.Message {
		return must(c.ReceiveMessage(cx, &sqs.ReceiveMessageInput{QueueUrl: &q, MaxNumberOfMessages: 2,
			ReceiveRequestAttemptId: str(attempt)})).Messages
	}
	first := recv("try-1")
	again := recv("try-1")
	if bodies(first) != "[a b]" || bodies(again) != "[a b]" || *again[0].ReceiptHandle != *first[0].ReceiptHandle ||
		*again[1].ReceiptHandle != *first[1].ReceiptHandle {
		t.Fatalf("retried attempt: %s then %s", bodies(first), bodies(again))
	}
	if other := recv("try-2"); len(other) != 0 {
		t.Fatalf("another attempt while the group is in flight: %s", bodies(other))
	}
	// Once a message of the attempt is settled, a retry receives afresh.
	for _, m := range first {
		must(c.DeleteMessage(cx, &sqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: m.ReceiptHandle}))
	}
	if next := recv("try-1"); bodies(next) != "[c]" {
		t.Fatalf("retry after the delete: %s", bodies(next))
	}
	_, err := c.ReceiveMessage(cx, &sqs.ReceiveMessageInput{QueueUrl: &q, ReceiveRequestAttemptId: str("bad id")})
	if apiCode(t, err) != "InvalidParameterValue" {
		t.Fatalf("bad attempt id: %v", err)
	}
	std := createQueue(t, c, "attempts-std", nil)
	must(c.ReceiveMessage(cx, &sqs.ReceiveMessageInput{QueueUrl: &std, ReceiveRequestAttemptId: str("any thing")}))
}
