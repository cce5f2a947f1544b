package service_test

import (
	"context"
	"testing"

	"github.com/skipq/skipq/internal/service"
)

// A send that stores nothing creates nothing: an atomic batch refused by
// the database (a key conflict within it, a FIFO group rule) leaves no
// queue behind where there was none.
func TestRefusedSendCreatesNoQueue(t *testing.T) {
	svc, _, _ := newService(t)
	ctx := context.Background()
	for name, batch := range map[string][]service.MessageInput{
		"conflict": {{Body: "a", MessageID: "k"}, {Body: "b", MessageID: "k"}},
		"groups":   {{Body: "a", GroupID: "g"}, {Body: "b"}},
	} {
		_, err := svc.SendBatch(ctx, "default", name, batch)
		if k := service.KindOf(err); k != service.KindIdempotencyConflict && k != service.KindInvalid {
			t.Fatalf("%s: the batch answered %v, want it refused", name, err)
		}
		if _, err := svc.GetQueue(ctx, "default", name); service.KindOf(err) != service.KindNotFound {
			t.Fatalf("%s: after the refused batch the queue is there (%v)", name, err)
		}
	}
	// A send that does store still creates its queue.
	if _, err := svc.SendBatch(ctx, "default", "groups", []service.MessageInput{{Body: "a", GroupID: "g"}}); err != nil {
		t.Fatal(err)
	}
	if q, err := svc.GetQueue(ctx, "default", "groups"); err != nil || !q.FIFO {
		t.Fatalf("queue created by a FIFO send: %+v, %v", q, err)
	}
}

// An SQS send never creates a queue: sent to one that another node just
// deleted, it answers not-found and the queue stays deleted.
func TestSQSSendRefusesAMissingQueue(t *testing.T) {
	svc, _, pool := newService(t)
	ctx := context.Background()
	if _, _, err := svc.PutQueue(ctx, "default", "gone", service.QueueSettings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SQSSend(ctx, "default", "gone", service.MessageInput{Body: "x"}); err != nil {
		t.Fatal(err)
	}
	otherNode := service.New(pool, service.Options{Limits: service.DefaultLimits()})
	if err := otherNode.DeleteQueue(ctx, "default", "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SQSSend(ctx, "default", "gone", service.MessageInput{Body: "x"}); service.KindOf(err) != service.KindNotFound {
		t.Fatalf("SQSSend to the deleted queue: %v, want not found", err)
	}
	if _, err := svc.SQSSendBatch(ctx, "default", "gone", []service.MessageInput{{Body: "x"}, {Body: "y"}}); service.KindOf(err) != service.KindNotFound {
		t.Fatalf("SQSSendBatch to the deleted queue: %v, want not found", err)
	}
	if _, err := svc.GetQueue(ctx, "default", "gone"); service.KindOf(err) != service.KindNotFound {
		t.Fatalf("the deleted queue is back: %v", err)
	}
}
