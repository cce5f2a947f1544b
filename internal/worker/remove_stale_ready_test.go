package worker_test

import (
	"context"
	"testing"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/worker"
)

// The ready rows of a leased message and of a message that is gone (what a
// settle racing the timers can leave, internal/db/ready_race_test.go) are
// removed; the row of a ready message stays.
func TestRemoveStaleReady(t *testing.T) {
	svc, _, pool := newService(t)
	ctx := context.Background()
	for _, body := range []string{"leased", "ready"} {
		if _, err := svc.Send(ctx, "default", "q", service.MessageInput{Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	if msgs, err := svc.Receive(ctx, "default", "q", service.ReceiveOptions{WaitSeconds: new(0)}); err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %v %v", msgs, err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO skipq.ready (queue_id, sequence)
		SELECT m.queue_id, m.sequence FROM skipq.messages m WHERE NOT m.ready
		UNION ALL SELECT m.queue_id, m.sequence + 100 FROM skipq.messages m WHERE NOT m.ready`); err != nil {
		t.Fatal(err)
	}
	if err := worker.NewRemoveStaleReady(pool, svc).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	var rows, readyRows int
	err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM skipq.ready),
		(SELECT count(*) FROM skipq.ready r JOIN skipq.messages m USING (queue_id, sequence) WHERE m.ready)`).
		Scan(&rows, &readyRows)
	if err != nil || rows != 1 || readyRows != 1 {
		t.Fatalf("%d ready rows left, %d of a ready message (%v); want the ready message's alone", rows, readyRows, err)
	}
}
