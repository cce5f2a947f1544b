package sqsapi_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/skipq/skipq/internal/node/nodetest"
)

// SendMessage never creates a queue: a queue deleted on another node,
// while this node's queue cache may still hold it, answers
// QueueDoesNotExist to SendMessage and SendMessageBatch, and stays deleted.
func TestSendToAQueueDeletedElsewhere(t *testing.T) {
	a := newNode(t)
	b := nodetest.Start(t, a.DB)
	onA, onB := client(t, a.URL, "x", "x"), client(t, b, "x", "x")
	cx := ctx(t)
	q := createQueue(t, onA, "deleted-elsewhere", nil)
	must(onB.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: str("primes b's cache")}))
	must(onA.DeleteQueue(cx, &sqs.DeleteQueueInput{QueueUrl: &q}))

	var missing *types.QueueDoesNotExist
	_, err := onB.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: str("after the delete")})
	if !errors.As(err, &missing) {
		t.Fatalf("SendMessage to the deleted queue: %v", err)
	}
	_, err = onB.SendMessageBatch(cx, &sqs.SendMessageBatchInput{QueueUrl: &q,
		Entries: []types.SendMessageBatchRequestEntry{{Id: str("1"), MessageBody: str("after the delete")}}})
	if !errors.As(err, &missing) {
		t.Fatalf("SendMessageBatch to the deleted queue: %v", err)
	}
	if _, err := onA.GetQueueUrl(cx, &sqs.GetQueueUrlInput{QueueName: str("deleted-elsewhere")}); !errors.As(err, &missing) {
		t.Fatalf("the deleted queue: %v, want it still gone", err)
	}
}
