package sqsapi_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// deadLetter sends n messages to src (maxReceiveCount 1) and releases each
// after its one delivery, which dead-letters it at once.
func deadLetter(t *testing.T, c *sqs.Client, src string, n int) {
	t.Helper()
	cx := ctx(t)
	for range n {
		must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &src, MessageBody: str("m")}))
		out := must(c.ReceiveMessage(cx, &sqs.ReceiveMessageInput{QueueUrl: &src}))
		must(c.ChangeMessageVisibility(cx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &src, ReceiptHandle: out.Messages[0].ReceiptHandle}))
	}
}

// awaitTask waits until the source's latest task has left RUNNING and
// CANCELLING, and returns it.
func awaitTask(t *testing.T, c *sqs.Client, sourceArn string) types.ListMessageMoveTasksResultEntry {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := must(c.ListMessageMoveTasks(ctx(t), &sqs.ListMessageMoveTasksInput{SourceArn: &sourceArn}))
		if len(out.Results) != 1 {
			t.Fatalf("tasks: %+v", out.Results)
		}
		if r := out.Results[0]; *r.Status != "RUNNING" && *r.Status != "CANCELLING" {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("task still %s", *out.Results[0].Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func depth(t *testing.T, c *sqs.Client, q string) string {
	t.Helper()
	return must(c.GetQueueAttributes(ctx(t), &sqs.GetQueueAttributesInput{QueueUrl: &q,
		AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages"}})).Attributes["ApproximateNumberOfMessages"]
}

// docs/SQS.md#actions: StartMessageMoveTask, ListMessageMoveTasks and
// CancelMessageMoveTask on the native redrive.
func TestMessageMoveTasks(t *testing.T) {
	n := newNode(t)
	c := client(t, n.URL, "x", "x")
	cx := ctx(t)
	dlq := createQueue(t, c, "mv-dlq", nil)
	dlqArn := "arn:aws:sqs:eu-west-1:000000000000:mv-dlq"
	src := createQueue(t, c, "mv-src", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqArn + `","maxReceiveCount":1}`})
	other := createQueue(t, c, "mv-other", nil)
	deadLetter(t, c, src, 3)
	if d := depth(t, c, dlq); d != "3" {
		t.Fatalf("DLQ holds %s", d)
	}

	// One message a second: the task is still running when a second start
	// and the cancel arrive.
	slow := must(c.StartMessageMoveTask(cx, &sqs.StartMessageMoveTaskInput{SourceArn: &dlqArn,
		MaxNumberOfMessagesPerSecond: aws.Int32(1)}))
	_, err := c.StartMessageMoveTask(cx, &sqs.StartMessageMoveTaskInput{SourceArn: &dlqArn})
	if apiCode(t, err) != "InvalidParameterValue" {
		t.Fatalf("second task: %v", err)
	}
	running := must(c.ListMessageMoveTasks(cx, &sqs.ListMessageMoveTasksInput{SourceArn: &dlqArn})).Results[0]
	if *running.TaskHandle != *slow.TaskHandle || running.ApproximateNumberOfMessagesToMove == nil ||
		*running.ApproximateNumberOfMessagesToMove != 3 || *running.MaxNumberOfMessagesPerSecond != 1 || *running.SourceArn != dlqArn {
		t.Fatalf("running task: %+v", running)
	}
	must(c.CancelMessageMoveTask(cx, &sqs.CancelMessageMoveTaskInput{TaskHandle: slow.TaskHandle}))
	cancelled := awaitTask(t, c, dlqArn)
	if *cancelled.Status != "CANCELLED" || cancelled.TaskHandle != nil || cancelled.ApproximateNumberOfMessagesMoved >= 3 {
		t.Fatalf("cancelled task: %+v", cancelled)
	}
	_, err = c.CancelMessageMoveTask(cx, &sqs.CancelMessageMoveTaskInput{TaskHandle: slow.TaskHandle})
	if apiCode(t, err) != "InvalidParameterValue" {
		t.Fatalf("cancelling a cancelled task: %v", err)
	}

	// The rest to another queue.
	otherArn := "arn:aws:sqs:eu-west-1:000000000000:mv-other"
	must(c.StartMessageMoveTask(cx, &sqs.StartMessageMoveTaskInput{SourceArn: &dlqArn, DestinationArn: &otherArn}))
	done := awaitTask(t, c, dlqArn)
	if *done.Status != "COMPLETED" || *done.DestinationArn != otherArn ||
		done.ApproximateNumberOfMessagesMoved+cancelled.ApproximateNumberOfMessagesMoved != 3 {
		t.Fatalf("completed task: %+v (cancelled one moved %d)", done, cancelled.ApproximateNumberOfMessagesMoved)
	}
	k := cancelled.ApproximateNumberOfMessagesMoved
	if s, o, d := depth(t, c, src), depth(t, c, other), depth(t, c, dlq); s != fmt.Sprint(k) || o != fmt.Sprint(3-k) || d != "0" {
		t.Fatalf("after the moves: source %s, other %s, DLQ %s (the cancelled task moved %d)", s, o, d, k)
	}
	list := must(c.ListMessageMoveTasks(cx, &sqs.ListMessageMoveTasksInput{SourceArn: &dlqArn, MaxResults: aws.Int32(10)}))
	if len(list.Results) != 2 || *list.Results[0].Status != "COMPLETED" || *list.Results[1].Status != "CANCELLED" {
		t.Fatalf("history: %+v", list.Results)
	}

	for _, tc := range []struct {
		name, code string
		call       func() error
	}{
		{"source that is no DLQ", "InvalidParameterValue", func() error {
			_, err := c.StartMessageMoveTask(cx, &sqs.StartMessageMoveTaskInput{SourceArn: str("arn:aws:sqs:eu-west-1:000000000000:mv-src")})
			return err
		}},
		{"unknown source", "ResourceNotFoundException", func() error {
			_, err := c.StartMessageMoveTask(cx, &sqs.StartMessageMoveTaskInput{SourceArn: str("arn:aws:sqs:eu-west-1:000000000000:nope")})
			return err
		}},
		{"unknown destination", "ResourceNotFoundException", func() error {
			_, err := c.StartMessageMoveTask(cx, &sqs.StartMessageMoveTaskInput{SourceArn: &dlqArn,
				DestinationArn: str("arn:aws:sqs:eu-west-1:000000000000:nope")})
			return err
		}},
		{"malformed ARN", "InvalidParameterValue", func() error {
			_, err := c.ListMessageMoveTasks(cx, &sqs.ListMessageMoveTasksInput{SourceArn: str("mv-dlq")})
			return err
		}},
		{"rate 501", "InvalidParameterValue", func() error {
			_, err := c.StartMessageMoveTask(cx, &sqs.StartMessageMoveTaskInput{SourceArn: &dlqArn, MaxNumberOfMessagesPerSecond: aws.Int32(501)})
			return err
		}},
		{"unknown task", "ResourceNotFoundException", func() error {
			_, err := c.CancelMessageMoveTask(cx, &sqs.CancelMessageMoveTaskInput{TaskHandle: str("bm9wZQ")})
			return err
		}},
	} {
		if code := apiCode(t, tc.call()); code != tc.code {
			t.Errorf("%s: %s, want %s", tc.name, code, tc.code)
		}
	}
}
