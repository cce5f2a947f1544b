package sqsstate_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/sqs/sqsstate"
	"github.com/skipq/skipq/internal/testdb"
)

// A move task whose node stopped (its heartbeat is old) is taken over and
// finished by a worker (listing tasks only reads, see
// sqs.TestReadKeyListMessageMoveTasksChangesNothing); one whose node still
// beats is left alone.
func TestSQSMoveTaskTakeOver(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	svc := service.New(pool, service.Options{Limits: service.DefaultLimits()})
	state := sqsstate.New(pool, svc, nil)
	ctx := context.Background()
	one, dlq := 1, "mt.dlq"
	if _, _, err := svc.PutQueue(ctx, "default", "mt", service.QueueSettings{MaxReceiveCount: &one, DeadLetterQueue: &dlq}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := svc.Send(ctx, "default", "mt", service.MessageInput{Body: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	three, zero := 3, 0
	got, err := svc.Receive(ctx, "default", "mt", service.ReceiveOptions{MaxMessages: &three, WaitSeconds: &zero})
	if err != nil || len(got) != 3 {
		t.Fatalf("receive: %v %d", err, len(got))
	}
	if _, err := svc.Nack(ctx, []string{got[0].ReceiptHandle, got[1].ReceiptHandle, got[2].ReceiptHandle}, nil); err != nil {
		t.Fatal(err)
	}
	// A task another node runs: it beat just now.
	if _, err := pool.Exec(ctx, `INSERT INTO skipq.sqs_move_tasks (source_queue_id, destination, to_move, runner)
		SELECT id, '', 3, gen_random_uuid() FROM skipq.queues WHERE name = $1`, dlq); err != nil {
		t.Fatal(err)
	}
	tasks, err := state.ListMoveTasks(ctx, "default", dlq, 10)
	if err != nil || len(tasks) != 1 || tasks[0].Status != "RUNNING" || tasks[0].Moved != 0 {
		t.Fatalf("live task: %v %+v", err, tasks)
	}
	if n, err := state.TakeOverMoveTasks(ctx, 10); err != nil || n != 0 {
		t.Fatalf("a live task was taken over: %v %d", err, n)
	}
	if _, err := state.StartMoveTask(ctx, "default", dlq, "", nil); service.KindOf(err) != service.KindInvalid {
		t.Fatalf("a second task while one runs: %v", err)
	}
	// Its node went away.
	if _, err := pool.Exec(ctx, `UPDATE skipq.sqs_move_tasks SET heartbeat_at = now() - interval '2 minutes'`); err != nil {
		t.Fatal(err)
	}
	if n, err := state.TakeOverMoveTasks(ctx, 10); err != nil || n != 1 {
		t.Fatalf("take over: %v %d", err, n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		tasks, err = state.ListMoveTasks(ctx, "default", dlq, 10)
		if err != nil {
			t.Fatal(err)
		}
		if tasks[0].Status == "COMPLETED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task not finished: %+v", tasks[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	q, err := svc.GetQueue(ctx, "default", "mt")
	if err != nil || tasks[0].Moved != 3 || q.Stats.Available != 3 {
		t.Fatalf("after the take-over: %v moved %d, source holds %+v", err, tasks[0].Moved, q.Stats)
	}
}
