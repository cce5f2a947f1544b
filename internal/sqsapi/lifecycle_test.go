package sqsapi_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Create, look up, list, delete; create's idempotency.
func TestQueueLifecycle(t *testing.T) {
	n := newNode(t)
	c := client(t, n.URL, "x", "x")
	cx := ctx(t)
	var urls []string
	for _, name := range []string{"life-a", "life-b", "other"} {
		out := must(c.CreateQueue(cx, &sqs.CreateQueueInput{QueueName: str(name)}))
		urls = append(urls, *out.QueueUrl)
	}
	if want := n.URL + "/000000000000/life-a"; urls[0] != want {
		t.Fatalf("queue URL %s, want %s", urls[0], want)
	}
	got := must(c.GetQueueUrl(cx, &sqs.GetQueueUrlInput{QueueName: str("life-a")}))
	if *got.QueueUrl != urls[0] {
		t.Fatalf("GetQueueUrl %s, want %s", *got.QueueUrl, urls[0])
	}
	list := must(c.ListQueues(cx, &sqs.ListQueuesInput{QueueNamePrefix: str("life-")}))
	if fmt.Sprint(list.QueueUrls) != fmt.Sprint(urls[:2]) || list.NextToken != nil {
		t.Fatalf("ListQueues: %v next %v", list.QueueUrls, list.NextToken)
	}
	var paged []string
	var token *string
	for {
		page := must(c.ListQueues(cx, &sqs.ListQueuesInput{MaxResults: aws.Int32(1), NextToken: token}))
		paged = append(paged, page.QueueUrls...)
		if token = page.NextToken; token == nil {
			break
		}
	}
	if len(paged) != 3 {
		t.Fatalf("paging saw %v", paged)
	}
	// Same attributes: the same URL; a different value: QueueNameExists.
	must(c.CreateQueue(cx, &sqs.CreateQueueInput{QueueName: str("life-a"), Attributes: map[string]string{"VisibilityTimeout": "30"}}))
	_, err := c.CreateQueue(cx, &sqs.CreateQueueInput{QueueName: str("life-a"), Attributes: map[string]string{"VisibilityTimeout": "31"}})
	var exists *types.QueueNameExists
	if !errors.As(err, &exists) || apiCode(t, err) != "QueueAlreadyExists" {
		t.Fatalf("different attributes: %v", err)
	}
	must(c.DeleteQueue(cx, &sqs.DeleteQueueInput{QueueUrl: &urls[0]}))
	_, err = c.GetQueueUrl(cx, &sqs.GetQueueUrlInput{QueueName: str("life-a")})
	var missing *types.QueueDoesNotExist
	if !errors.As(err, &missing) || apiCode(t, err) != "AWS.SimpleQueueService.NonExistentQueue" {
		t.Fatalf("deleted queue: %v", err)
	}
	if !strings.Contains(err.Error(), "The specified queue does not exist.") {
		t.Fatalf("message: %v", err)
	}
}
