package sqsapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// skipqAPI calls skipq's own HTTP API on the node (auth off) and decodes
// the answer, failing unless the status is want.
func skipqAPI(t *testing.T, method, url, body string, want int) map[string]any {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out
}

// DeleteMessage and DeleteMessageBatch are acks: a queue with
// retainAckedSeconds (set over skipq's API) keeps what they delete, in
// state acked, and a second delete of the same handle is still a success.
func TestDeleteRetains(t *testing.T) {
	n := newNode(t)
	c := client(t, n.URL, "x", "x")
	cx := ctx(t)
	q := createQueue(t, c, "kept", nil)
	skipqAPI(t, "PUT", n.URL+"/v1/queues/kept", `{"retainAckedSeconds": 600}`, http.StatusOK)
	for _, b := range []string{"a", "b"} {
		must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: str(b)}))
	}
	got := must(c.ReceiveMessage(cx, &sqs.ReceiveMessageInput{QueueUrl: &q, MaxNumberOfMessages: 2}))
	if len(got.Messages) != 2 {
		t.Fatalf("received %d", len(got.Messages))
	}
	h := got.Messages[0].ReceiptHandle
	must(c.DeleteMessage(cx, &sqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: h}))
	must(c.DeleteMessage(cx, &sqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: h}))
	batch := must(c.DeleteMessageBatch(cx, &sqs.DeleteMessageBatchInput{QueueUrl: &q, Entries: []types.DeleteMessageBatchRequestEntry{
		{Id: str("b"), ReceiptHandle: got.Messages[1].ReceiptHandle}}}))
	if len(batch.Successful) != 1 {
		t.Fatalf("DeleteMessageBatch: %+v", batch)
	}
	for _, m := range got.Messages {
		msg := skipqAPI(t, "GET", n.URL+"/v1/queues/kept/messages/"+*m.MessageId, "", http.StatusOK)
		if msg["state"] != "acked" {
			t.Fatalf("%s after its delete: %v", *m.MessageId, msg)
		}
	}
	attrs := must(c.GetQueueAttributes(cx, &sqs.GetQueueAttributesInput{QueueUrl: &q,
		AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"}}))
	if attrs.Attributes["ApproximateNumberOfMessages"] != "0" || attrs.Attributes["ApproximateNumberOfMessagesNotVisible"] != "0" {
		t.Fatalf("retained messages counted: %v", attrs.Attributes)
	}
}
