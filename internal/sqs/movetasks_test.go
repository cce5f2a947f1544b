package sqs_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/testdb"
)

// ListMessageMoveTasks is a read key's call and only reads: a task whose
// node stopped is listed as it is, not taken over (that is the worker's).
func TestReadKeyListMessageMoveTasksChangesNothing(t *testing.T) {
	h, svc, pool := endpointOn(t, testdb.New(t), false, 1<<20, nil)
	ctx := context.Background()
	one, dlq := 1, "lm.dlq"
	if _, _, err := svc.PutQueue(ctx, "default", "lm", service.QueueSettings{MaxReceiveCount: &one, DeadLetterQueue: &dlq}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutQueue(ctx, "default", dlq, service.QueueSettings{}); err != nil {
		t.Fatal(err)
	}
	// A running task whose node went away two minutes ago.
	if _, err := pool.Exec(ctx, `INSERT INTO skipq.sqs_move_tasks (source_queue_id, destination, to_move, runner, heartbeat_at)
		SELECT id, '', 3, gen_random_uuid(), now() - interval '2 minutes' FROM skipq.queues WHERE name = $1`, dlq); err != nil {
		t.Fatal(err)
	}
	taskRow := func() string {
		var row string
		if err := pool.QueryRow(ctx, `SELECT t::text FROM skipq.sqs_move_tasks t`).Scan(&row); err != nil {
			t.Fatal(err)
		}
		return row
	}
	before := taskRow()
	reader := sqsKey(t, pool, "read")
	rec := reader.call(h, "ListMessageMoveTasks", []byte(`{"SourceArn":"arn:aws:sqs:us-east-1:000000000000:lm.dlq"}`), func(*http.Request) {})
	if rec.Code != 200 {
		t.Fatalf("list: %d %s", rec.Code, rec.Body)
	}
	if after := taskRow(); after != before {
		t.Fatalf("a read key's list changed the task:\n%s\n%s", before, after)
	}
}
