package sqsapi_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func createQueue(t *testing.T, c *sqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	return *must(c.CreateQueue(ctx(t), &sqs.CreateQueueInput{QueueName: str(name), Attributes: attrs})).QueueUrl
}

func strAttr(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: str("String"), StringValue: str(v)}
}

// A round trip with every attribute type (the SDK
// checks the body MD5s; the attribute MD5s are held to §11.11's vectors),
// and the attribute filters of a receive.
func TestSendReceiveRoundTrip(t *testing.T) {
	n := newNode(t)
	c := client(t, n.URL, "x", "x")
	cx := ctx(t)
	q := createQueue(t, c, "round", nil)
	sent := must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: str("héllo 🌍"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"count": {DataType: str("Number.int"), StringValue: str("7")},
			"img":   {DataType: str("Binary.png"), BinaryValue: []byte{0x89, 0x50, 0x4e, 0x47}},
		},
		MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{"AWSTraceHeader": {DataType: str("String"),
			StringValue: str("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")}},
	}))
	if *sent.MD5OfMessageBody != "a4115cc10566f0181d01df50100b37ff" || *sent.MD5OfMessageAttributes != "4c59d69f5cd6e40066255c1b232eb78c" ||
		*sent.MD5OfMessageSystemAttributes != "5ae4d5d7636402d80f4eb6d213245a88" {
		t.Fatalf("send MD5s: %s %s %s", *sent.MD5OfMessageBody, *sent.MD5OfMessageAttributes, *sent.MD5OfMessageSystemAttributes)
	}
	got := must(c.ReceiveMessage(cx, &sqs.ReceiveMessageInput{QueueUrl: &q, MessageAttributeNames: []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}}))
	if len(got.Messages) != 1 {
		t.Fatalf("received %d messages", len(got.Messages))
	}
	m := got.Messages[0]
	if *m.Body != "héllo 🌍" || *m.MessageId != *sent.MessageId || *m.MD5OfMessageAttributes != "4c59d69f5cd6e40066255c1b232eb78c" {
		t.Fatalf("received %+v", m)
	}
	if string(m.MessageAttributes["img"].BinaryValue) != "\x89PNG" || *m.MessageAttributes["count"].StringValue != "7" {
		t.Fatalf("attributes %+v", m.MessageAttributes)
	}
	if m.Attributes["ApproximateReceiveCount"] != "1" || m.Attributes["SenderId"] != "anonymous" ||
		m.Attributes["AWSTraceHeader"] == "" || m.Attributes["SentTimestamp"] == "" || m.Attributes["ApproximateFirstReceiveTimestamp"] == "" {
		t.Fatalf("system attributes %v", m.Attributes)
	}

	// Filters, against AWS's recorded answers (docs/SQS.md).
	must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: str("msg"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"General": strAttr("Kenobi"), "Hello": strAttr("There"), "Help.Me": strAttr("Me")}}))
	for _, c := range []struct {
		names []string
		md5   string
		count int
	}{
		{nil, "", 0}, {[]string{"All"}, "4c360f3fdafd970e05fae2f149d997f5", 3}, {[]string{".*"}, "4c360f3fdafd970e05fae2f149d997f5", 3},
		{[]string{"Hello"}, "a311262e065454b75da111d535b8dacd", 1}, {[]string{"Hel.*"}, "83fee93c1bcd8b9a5a923ffacdc636c7", 2},
		{[]string{"General", "Hello"}, "fca026605781cb4126a1e9044df24232", 2}, {[]string{"Unknown"}, "", 0}, {[]string{"AWS."}, "", 0},
	} {
		body := map[string]any{"QueueUrl": q, "VisibilityTimeout": 0}
		if c.names != nil {
			body["MessageAttributeNames"] = c.names
		}
		r := raw(t, n.URL, "ReceiveMessage", body)
		msgs, _ := r.Body["Messages"].([]any)
		var msg map[string]any
		for _, x := range msgs {
			if x.(map[string]any)["Body"] == "msg" {
				msg = x.(map[string]any)
			}
		}
		if msg == nil {
			// The other message came first (one per receive): try again.
			r = raw(t, n.URL, "ReceiveMessage", body)
			msgs, _ = r.Body["Messages"].([]any)
			if len(msgs) == 0 {
				t.Fatalf("filter %v: nothing received: %s", c.names, r.Raw)
			}
			msg = msgs[0].(map[string]any)
		}
		attrs, _ := msg["MessageAttributes"].(map[string]any)
		md5, hasMD5 := msg["MD5OfMessageAttributes"]
		if len(attrs) != c.count || (c.md5 == "" && hasMD5) || (c.md5 != "" && md5 != c.md5) {
			t.Fatalf("filter %v: %d attributes, MD5 %v; want %d, %q: %s", c.names, len(attrs), md5, c.count, c.md5, r.Raw)
		}
	}
}

// Partial success and the five request-level batch errors.
func TestSendMessageBatch(t *testing.T) {
	n := newNode(t)
	c := client(t, n.URL, "x", "x")
	cx := ctx(t)
	q := createQueue(t, c, "batch", map[string]string{"MaximumMessageSize": "1024"})
	var entries []types.SendMessageBatchRequestEntry
	for i := range 10 {
		entries = append(entries, types.SendMessageBatchRequestEntry{Id: str("e" + strconv.Itoa(i)), MessageBody: str("m" + strconv.Itoa(i))})
	}
	entries[3].MessageBody = str(strings.Repeat("x", 1025))
	out := must(c.SendMessageBatch(cx, &sqs.SendMessageBatchInput{QueueUrl: &q, Entries: entries}))
	if len(out.Successful) != 9 || len(out.Failed) != 1 || *out.Failed[0].Id != "e3" || !out.Failed[0].SenderFault ||
		*out.Failed[0].Code != "InvalidParameterValue" {
		t.Fatalf("partial success: %+v", out)
	}
	for _, bad := range []struct {
		entries []map[string]any
		typ     string
		code    string
	}{
		{[]map[string]any{}, "EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest"},
		{make11(), "TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"},
		{[]map[string]any{{"Id": "a", "MessageBody": "x"}, {"Id": "a", "MessageBody": "y"}}, "BatchEntryIdsNotDistinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"},
		{[]map[string]any{{"Id": "a b", "MessageBody": "x"}}, "InvalidBatchEntryId", "AWS.SimpleQueueService.InvalidBatchEntryId"},
		{[]map[string]any{{"Id": "a", "MessageBody": strings.Repeat("x", 600000)}, {"Id": "b", "MessageBody": strings.Repeat("x", 600000)}},
			"BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong"},
	} {
		raw(t, n.URL, "SendMessageBatch", map[string]any{"QueueUrl": q, "Entries": bad.entries}).sqsError(t, 400, bad.typ, bad.code)
	}
}

func make11() []map[string]any {
	var out []map[string]any
	for i := range 11 {
		out = append(out, map[string]any{"Id": strconv.Itoa(i), "MessageBody": "x"})
	}
	return out
}

// Long polls end at their wait, wake on a send, and check
// their parameters.
func TestLongPoll(t *testing.T) {
	n := newNode(t)
	c := client(t, n.URL, "x", "x")
	cx := ctx(t)
	q := createQueue(t, c, "poll", map[string]string{"ReceiveMessageWaitTimeSeconds": "1"})
	start := time.Now()
	empty := must(c.ReceiveMessage(cx, &sqs.ReceiveMessageInput{QueueUrl: &q})) // the queue's 1 s
	if len(empty.Messages) != 0 || time.Since(start) < time.Second {
		t.Fatalf("queue wait: %d messages after %v", len(empty.Messages), time.Since(start))
	}
	r := raw(t, n.URL, "ReceiveMessage", map[string]any{"QueueUrl": q, "WaitTimeSeconds": 0})
	if r.Status != 200 || r.Raw != "{}" {
		t.Fatalf("empty receive: %d %s", r.Status, r.Raw)
	}
	got := make(chan *sqs.ReceiveMessageOutput, 1)
	go func() {
		out, _ := c.ReceiveMessage(cx, &sqs.ReceiveMessageInput{QueueUrl: &q, WaitTimeSeconds: 20})
		got <- out
	}()
	time.Sleep(200 * time.Millisecond) // let the receive park (a later start is fine too)
	must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: str("wake")}))
	select {
	case out := <-got:
		if out == nil || len(out.Messages) != 1 {
			t.Fatalf("woken receive: %+v", out)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the long poll did not wake")
	}
	raw(t, n.URL, "ReceiveMessage", map[string]any{"QueueUrl": q, "WaitTimeSeconds": 21}).sqsError(t, 400, "InvalidParameterValueException", "InvalidParameterValue")
	r = raw(t, n.URL, "ReceiveMessage", map[string]any{"QueueUrl": q, "MaxNumberOfMessages": 11})
	r.sqsError(t, 400, "InvalidParameterValueException", "InvalidParameterValue")
	if r.Body["message"] != "Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided." {
		t.Fatalf("message: %s", r.Raw)
	}
}

// Visibility (0 included, D4) and receipt handles.
func TestVisibilityAndReceipts(t *testing.T) {
	n := newNode(t)
	c := client(t, n.URL, "x", "x")
	cx := ctx(t)
	q := createQueue(t, c, "vis", nil)
	other := createQueue(t, c, "vis-other", nil)
	must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: str("a")}))
	must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &other, MessageBody: str("b")}))
	// VisibilityTimeout 0 on receive (which the SDK cannot send: it omits
	// zero integers): receivable again at once, counted.
	first := raw(t, n.URL, "ReceiveMessage", map[string]any{"QueueUrl": q, "VisibilityTimeout": 0})
	if msgs, _ := first.Body["Messages"].([]any); len(msgs) != 1 {
		t.Fatalf("first receive: %s", first.Raw)
	}
	again := must(c.ReceiveMessage(cx, &sqs.ReceiveMessageInput{QueueUrl: &q,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{"ApproximateReceiveCount"}}))
	if len(again.Messages) != 1 || again.Messages[0].Attributes["ApproximateReceiveCount"] != "2" {
		t.Fatalf("visibility 0, then: %+v", again.Messages)
	}
	h := again.Messages[0].ReceiptHandle
	if out := must(c.ReceiveMessage(cx, &sqs.ReceiveMessageInput{QueueUrl: &q})); len(out.Messages) != 0 {
		t.Fatal("an in-flight message was delivered again")
	}
	must(c.ChangeMessageVisibility(cx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &q, ReceiptHandle: h, VisibilityTimeout: 0}))
	third := must(c.ReceiveMessage(cx, &sqs.ReceiveMessageInput{QueueUrl: &q}))
	if len(third.Messages) != 1 {
		t.Fatal("ChangeMessageVisibility 0 did not release the message")
	}
	h = third.Messages[0].ReceiptHandle
	must(c.DeleteMessage(cx, &sqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: h}))
	must(c.DeleteMessage(cx, &sqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: h})) // stale: still 200
	_, err := c.ChangeMessageVisibility(cx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &q, ReceiptHandle: h, VisibilityTimeout: 10})
	if apiCode(t, err) != "InvalidParameterValue" {
		t.Fatalf("visibility of a deleted message: %v", err)
	}
	otherMsg := must(c.ReceiveMessage(cx, &sqs.ReceiveMessageInput{QueueUrl: &other}))
	for _, bad := range []string{"garbage", *otherMsg.Messages[0].ReceiptHandle} {
		_, err := c.DeleteMessage(cx, &sqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: str(bad)})
		var invalid *types.ReceiptHandleIsInvalid
		if !errors.As(err, &invalid) {
			t.Fatalf("handle %q: %v", bad, err)
		}
	}
	batch := must(c.DeleteMessageBatch(cx, &sqs.DeleteMessageBatchInput{QueueUrl: &other, Entries: []types.DeleteMessageBatchRequestEntry{
		{Id: str("ok"), ReceiptHandle: otherMsg.Messages[0].ReceiptHandle}, {Id: str("bad"), ReceiptHandle: str("garbage")}}}))
	if len(batch.Successful) != 1 || len(batch.Failed) != 1 || *batch.Failed[0].Code != "ReceiptHandleIsInvalid" {
		t.Fatalf("DeleteMessageBatch: %+v", batch)
	}
	cv := must(c.ChangeMessageVisibilityBatch(cx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &q,
		Entries: []types.ChangeMessageVisibilityBatchRequestEntry{{Id: str("stale"), ReceiptHandle: h, VisibilityTimeout: 5},
			{Id: str("bad"), ReceiptHandle: str("x")}}}))
	if len(cv.Failed) != 2 || *cv.Failed[0].Code != "InvalidParameterValue" || *cv.Failed[1].Code != "ReceiptHandleIsInvalid" {
		t.Fatalf("ChangeMessageVisibilityBatch: %+v", cv.Failed)
	}
}

// Delays and the dead-letter queue.
func TestDelayAndRedrive(t *testing.T) {
	n := newNode(t)
	c := client(t, n.URL, "x", "x")
	cx := ctx(t)
	dlq := createQueue(t, c, "dl-dlq", nil)
	arn := must(c.GetQueueAttributes(cx, &sqs.GetQueueAttributesInput{QueueUrl: &dlq,
		AttributeNames: []types.QueueAttributeName{"QueueArn"}})).Attributes["QueueArn"]
	src := createQueue(t, c, "dl-src", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + arn + `","maxReceiveCount":"2"}`})
	must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &src, MessageBody: str("late"), DelaySeconds: 1}))
	attrs := must(c.GetQueueAttributes(cx, &sqs.GetQueueAttributesInput{QueueUrl: &src, AttributeNames: []types.QueueAttributeName{"All"}})).Attributes
	if attrs["ApproximateNumberOfMessagesDelayed"] != "1" || attrs["RedrivePolicy"] != `{"deadLetterTargetArn":"`+arn+`","maxReceiveCount":2}` {
		t.Fatalf("attributes: %v", attrs)
	}
	for i := range 2 {
		out := must(c.ReceiveMessage(cx, &sqs.ReceiveMessageInput{QueueUrl: &src, WaitTimeSeconds: 5}))
		if len(out.Messages) != 1 {
			t.Fatalf("delivery %d: nothing", i+1)
		}
		must(c.ChangeMessageVisibility(cx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &src, ReceiptHandle: out.Messages[0].ReceiptHandle}))
	}
	moved := must(c.ReceiveMessage(cx, &sqs.ReceiveMessageInput{QueueUrl: &dlq, WaitTimeSeconds: 5,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}}))
	if len(moved.Messages) != 1 || moved.Messages[0].Attributes["DeadLetterQueueSourceArn"] != "arn:aws:sqs:eu-west-1:000000000000:dl-src" {
		t.Fatalf("dead-lettered: %+v", moved.Messages)
	}
	if out := must(c.ReceiveMessage(cx, &sqs.ReceiveMessageInput{QueueUrl: &src})); len(out.Messages) != 0 {
		t.Fatal("the source delivered a third time")
	}
	sources := must(c.ListDeadLetterSourceQueues(cx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: &dlq}))
	if len(sources.QueueUrls) != 1 || sources.QueueUrls[0] != src {
		t.Fatalf("sources %v", sources.QueueUrls)
	}
	must(c.SetQueueAttributes(cx, &sqs.SetQueueAttributesInput{QueueUrl: &src, Attributes: map[string]string{"RedrivePolicy": ""}}))
	if _, ok := must(c.GetQueueAttributes(cx, &sqs.GetQueueAttributesInput{QueueUrl: &src,
		AttributeNames: []types.QueueAttributeName{"All"}})).Attributes["RedrivePolicy"]; ok {
		t.Fatal("RedrivePolicy was not removed")
	}
	_, err := c.SetQueueAttributes(cx, &sqs.SetQueueAttributesInput{QueueUrl: &src, Attributes: map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:nope","maxReceiveCount":3}`}})
	if apiCode(t, err) != "InvalidParameterValue" {
		t.Fatalf("missing DLQ: %v", err)
	}
	_, err = c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &src, MessageBody: str("x"), DelaySeconds: 901})
	if apiCode(t, err) != "InvalidParameterValue" {
		t.Fatalf("DelaySeconds 901: %v", err)
	}
}

// Queue attributes, tags and purge.
func TestQueueAttributesTagsPurge(t *testing.T) {
	n := newNode(t)
	c := client(t, n.URL, "x", "x")
	cx := ctx(t)
	q := createQueue(t, c, "attrs", map[string]string{"MaximumMessageSize": "2048", "Policy": `{"Version":"2012-10-17"}`,
		"KmsMasterKeyId": "alias/x", "MessageRetentionPeriod": "1209600"})
	all := must(c.GetQueueAttributes(cx, &sqs.GetQueueAttributesInput{QueueUrl: &q, AttributeNames: []types.QueueAttributeName{"All"}})).Attributes
	for _, k := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed", "ApproximateNumberOfMessagesNotVisible",
		"CreatedTimestamp", "DelaySeconds", "LastModifiedTimestamp", "MaximumMessageSize", "MessageRetentionPeriod", "QueueArn",
		"ReceiveMessageWaitTimeSeconds", "SqsManagedSseEnabled", "VisibilityTimeout", "Policy", "KmsMasterKeyId"} {
		if _, ok := all[k]; !ok {
			t.Errorf("All lacks %s: %v", k, all)
		}
	}
	if len(all) != 14 || all["MessageRetentionPeriod"] != "1209600" || all["VisibilityTimeout"] != "30" || all["Policy"] != `{"Version":"2012-10-17"}` {
		t.Fatalf("All: %v", all)
	}
	must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: str(strings.Repeat("x", 2048))}))
	if _, err := c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: str(strings.Repeat("x", 2049))}); apiCode(t, err) != "InvalidParameterValue" {
		t.Fatalf("2049 bytes: %v", err)
	}
	_, err := c.SetQueueAttributes(cx, &sqs.SetQueueAttributesInput{QueueUrl: &q, Attributes: map[string]string{"Nope": "1"}})
	var badName *types.InvalidAttributeName
	if !errors.As(err, &badName) {
		t.Fatalf("unknown attribute: %v", err)
	}
	if _, err := c.SetQueueAttributes(cx, &sqs.SetQueueAttributesInput{QueueUrl: &q, Attributes: map[string]string{"VisibilityTimeout": "50000"}}); apiCode(t, err) != "InvalidAttributeValue" {
		t.Fatalf("VisibilityTimeout 50000: %v", err)
	}
	must(c.TagQueue(cx, &sqs.TagQueueInput{QueueUrl: &q, Tags: map[string]string{"team": "a", "env": "test"}}))
	must(c.UntagQueue(cx, &sqs.UntagQueueInput{QueueUrl: &q, TagKeys: []string{"env"}}))
	if tags := must(c.ListQueueTags(cx, &sqs.ListQueueTagsInput{QueueUrl: &q})).Tags; len(tags) != 1 || tags["team"] != "a" {
		t.Fatalf("tags %v", tags)
	}
	must(c.PurgeQueue(cx, &sqs.PurgeQueueInput{QueueUrl: &q}))
	if v := must(c.GetQueueAttributes(cx, &sqs.GetQueueAttributesInput{QueueUrl: &q,
		AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages"}})).Attributes["ApproximateNumberOfMessages"]; v != "0" {
		t.Fatalf("after purge: %s messages", v)
	}
	_ = aws.Int32
}
