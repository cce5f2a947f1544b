package sqs_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/handlers"
	"github.com/skipq/skipq/internal/metrics"
	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/sqs"
	"github.com/skipq/skipq/internal/sqs/sqsstate"
)

// FuzzSQS throws arbitrary SQS requests at the endpoint, with the database
// unreachable (what passes validation answers 503). The property: no panic,
// no 500, and every error is an SQS JSON error (__type, message,
// x-amzn-query-error), never the native envelope.
func FuzzSQS(f *testing.F) {
	pool, err := pgxpool.New(context.Background(), "postgres://skipq@127.0.0.1:1/skipq?sslmode=disable&connect_timeout=1")
	if err != nil {
		f.Fatal(err)
	}
	defer pool.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := service.New(pool, service.Options{Limits: service.DefaultLimits(), Log: log})
	h := handlers.New(svc, handlers.Config{
		AuthOff: true, MaxRequestBytes: 1 << 16, Log: log, Metrics: metrics.New(nil, nil),
		Ready: func(*gin.Context) error { return nil },
		SQS:   sqs.New(svc, sqsstate.New(pool, svc, log), sqs.Config{AuthOff: true, MaxRequestBytes: 1 << 16}),
	})
	for _, s := range [][2]string{
		{"SendMessage", `{"QueueUrl":"http://h/000000000000/q","MessageBody":"x","MessageAttributes":{"a":{"DataType":"Number","StringValue":"1"}}}`},
		{"SendMessageBatch", `{"QueueUrl":"q","Entries":[{"Id":"a","MessageBody":"x"},{"Id":"a","MessageBody":"y"}]}`},
		{"ReceiveMessage", `{"QueueUrl":"q","MaxNumberOfMessages":11,"WaitTimeSeconds":0}`},
		{"DeleteMessageBatch", `{"QueueUrl":"q","Entries":[{"Id":"a","ReceiptHandle":"zz"}]}`},
		{"ChangeMessageVisibility", `{"QueueUrl":"q","ReceiptHandle":"x","VisibilityTimeout":-1}`},
		{"CreateQueue", `{"QueueName":"q","Attributes":{"RedrivePolicy":"{\"deadLetterTargetArn\":\"arn:aws:sqs:r:1:d\",\"maxReceiveCount\":\"2\"}"},"tags":{"a":"b"}}`},
		{"SetQueueAttributes", `{"QueueUrl":"q","Attributes":{"VisibilityTimeout":5,"Policy":"{}"}}`},
		{"GetQueueAttributes", `{"QueueUrl":"q","AttributeNames":["All"]}`},
		{"ListQueues", `{"MaxResults":0,"NextToken":"%%"}`},
		{"ListDeadLetterSourceQueues", `{"QueueUrl":"q","NextToken":"!"}`},
		{"ListDeadLetterSourceQueues", `{"QueueUrl":"q","NextToken":"AAAAAAAAAAAAAAAAAAAA"}`},
		{"ListDeadLetterSourceQueues", `{"QueueUrl":"q","NextToken":"__4"}`},
		{"TagQueue", `{"QueueUrl":"q","Tags":{"a":"b\u0000"}}`},
		{"SetQueueAttributes", `{"QueueUrl":"q","Attributes":{"Policy":"a\u0000"}}`},
		{"TagQueue", `[]`},
		{"SendMessage", `{"QueueUrl":"q.fifo","MessageBody":"x","MessageGroupId":"g#1","MessageDeduplicationId":"d","DelaySeconds":3}`},
		{"ReceiveMessage", `{"QueueUrl":"q.fifo","ReceiveRequestAttemptId":"a b","MaxNumberOfMessages":10}`},
		{"CreateQueue", `{"QueueName":"q.fifo","Attributes":{"FifoQueue":"true","ContentBasedDeduplication":true,"DeduplicationScope":"messageGroup"}}`},
		{"StartMessageMoveTask", `{"SourceArn":"arn:aws:sqs:r:1:d","DestinationArn":"x","MaxNumberOfMessagesPerSecond":0}`},
		{"ListMessageMoveTasks", `{"SourceArn":"arn:aws:sqs:r:1:d","MaxResults":11}`},
		{"CancelMessageMoveTask", `{"TaskHandle":"c2tpcHEtbW92ZS10YXNrOjE"}`},
		{"Nope", ``},
	} {
		f.Add(s[0], s[1], "application/x-amz-json-1.0")
	}
	f.Fuzz(func(t *testing.T, op, body, contentType string) {
		req, err := http.NewRequest("POST", "http://skipq/", strings.NewReader(body))
		if err != nil || strings.ContainsAny(op, "\r\n") {
			return
		}
		req.Header.Set("X-Amz-Target", "AmazonSQS."+op)
		req.Header.Set("Content-Type", contentType)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %q: %d %s", op, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			var e struct {
				Type    string `json:"__type"`
				Message string `json:"message"`
			}
			if json.Unmarshal(rec.Body.Bytes(), &e) != nil || !strings.Contains(e.Type, "#") || e.Message == "" ||
				rec.Header().Get("x-amzn-query-error") == "" || rec.Header().Get("x-amzn-RequestId") == "" {
				t.Fatalf("%s %q: %d is not an SQS error: %s", op, body, rec.Code, rec.Body)
			}
		}
	})
}
