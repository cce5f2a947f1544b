package service_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skipq/skipq/internal/service"
)

// dedupQueue is the queue of the dedup tests, with a one-minute window.
const dedupQueue = "dedup"

func dedupService(t *testing.T) (*service.Service, *clock, func() []string) {
	t.Helper()
	svc, clk, pool := newService(t)
	if _, _, err := svc.PutQueue(context.Background(), "default", dedupQueue, service.QueueSettings{DedupWindowSeconds: new(60)}); err != nil {
		t.Fatal(err)
	}
	keys := func() []string {
		t.Helper()
		rows, err := pool.Query(context.Background(), "SELECT message_id FROM skipq.dedup_keys ORDER BY message_id")
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	return svc, clk, keys
}

func sendKeyed(t *testing.T, svc *service.Service, id, body string) (service.SendResult, error) {
	t.Helper()
	return svc.Send(context.Background(), "default", dedupQueue, service.MessageInput{MessageID: id, Body: body})
}

// takeAll receives (and so removes, autoAck) every available message and
// returns their ids.
func takeAll(t *testing.T, svc *service.Service) []string {
	t.Helper()
	msgs, err := svc.Receive(context.Background(), "default", dedupQueue,
		service.ReceiveOptions{MaxMessages: new(100), WaitSeconds: new(0), AutoAck: true})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.MessageID)
	}
	return ids
}

// A messageId is an idempotency key for the dedup window or while its
// message is still in the queue, whichever is longer (docs/API.md#model): past the
// window a resend of a message still queued is a duplicate (and a resend
// with other content a conflict); once the message has left too, the
// resend is a new message.
func TestDedupKeyLivesForWindowOrWhileQueued(t *testing.T) {
	svc, clk, _ := dedupService(t)
	first, err := sendKeyed(t, svc, "k", "x")
	if err != nil || first.Duplicate {
		t.Fatalf("first send: %+v %v", first, err)
	}
	clk.advance(2 * time.Minute) // past the window; the message is still queued
	again, err := sendKeyed(t, svc, "k", "x")
	if err != nil || !again.Duplicate || again.Sequence != first.Sequence {
		t.Fatalf("resend past the window while the message is queued: %+v %v; want a duplicate of %+v", again, err, first)
	}
	var se *service.Error
	if _, err := sendKeyed(t, svc, "k", "other"); !errors.As(err, &se) || se.Kind != service.KindIdempotencyConflict {
		t.Fatalf("other content past the window while the message is queued: %v; want an idempotency conflict", err)
	}
	if got := takeAll(t, svc); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("the queue held %v; want k once", got)
	}
	// Window over and message gone: a new message.
	fresh, err := sendKeyed(t, svc, "k", "x")
	if err != nil || fresh.Duplicate || fresh.Sequence == first.Sequence {
		t.Fatalf("resend after the window and the message: %+v %v; want a new message", fresh, err)
	}
	if got := takeAll(t, svc); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("the queue held %v; want the new k", got)
	}
	// Its key starts a new window: inside it, a resend is a duplicate of
	// the new message although that one has left the queue.
	if again, err := sendKeyed(t, svc, "k", "x"); err != nil || !again.Duplicate || again.Sequence != fresh.Sequence {
		t.Fatalf("resend within the new window: %+v %v; want a duplicate of %+v", again, err, fresh)
	}
}
