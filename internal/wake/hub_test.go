package wake

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skipq/skipq/internal/testdb"
)

// A wake-up that reaches a waiter as it leaves (its wait ended at the same
// moment) goes to the next waiter of the queue: with the listener up,
// nothing else would wake it before the safety recheck, seconds later.
func TestWakeUpOfALeavingWaiterIsPassedOn(t *testing.T) {
	h := NewHub("n", nil, slog.Default(), 0)
	first, second := h.Register(7), h.Register(7)
	h.Wake(7, 1)
	h.Leave(7, first)
	select {
	case <-second.c:
	default:
		t.Fatal("the next waiter was not woken")
	}
	// A waiter that leaves unwoken wakes nobody.
	third, fourth := h.Register(7), h.Register(7)
	h.Leave(7, third)
	select {
	case <-fourth.c:
		t.Fatal("a waiter that left without a wake-up woke the next one")
	default:
	}
}

// With the listener down, every recheck wakes the head waiter of each
// queue; with it up, only a full recheck does, and waiters of queues that
// do not exist yet are woken either way.
func TestRecheckWakesHeadWaitersOnlyWhenDue(t *testing.T) {
	h := NewHub("n", nil, slog.Default(), 0)
	head, next, missing := h.Register(7), h.Register(7), h.Register(MissingQueue)
	h.recheck(false)
	if len(head.c) != 0 || len(missing.c) != 1 {
		t.Fatalf("a partial recheck woke the head waiter (%d) or not the missing queue's (%d)", len(head.c), len(missing.c))
	}
	h.recheck(true)
	if len(head.c) != 1 || len(next.c) != 0 {
		t.Fatalf("a full recheck woke %d head and %d next waiters, want 1 and 0", len(head.c), len(next.c))
	}
}

// The wake-up protocol has one writer in SQL (skipq.wake) and one reader in
// Go (ParseNotice): notifications skipq.wake sends on the channel the node
// listens on (Channel) parse back to what was announced.
func TestWakeNotificationsFromSQLParse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT skipq.wake('node-1', ARRAY[7, 9007199254740993], ARRAY[3, 1])"); err != nil {
		t.Fatal(err)
	}
	want := []Notice{{"node-1", 7, 3}, {"node-1", 9007199254740993, 1}}
	for _, w := range want {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := ParseNotice(n.Payload)
		if !ok || got != w {
			t.Fatalf("payload %q parsed to %+v (%v), want %+v", n.Payload, got, ok, w)
		}
	}
	for _, bad := range []string{"", "node", "node 7", "node x 1", "node 7 y"} {
		if _, ok := ParseNotice(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// PublishEach tells how many local waiters it will wake before any of them
// wakes (their claims are announced to the sharer first), then wakes the
// head waiter of each queue and queues one notification each.
func TestPublishEachCountsWaitersBeforeWaking(t *testing.T) {
	h := NewHub("n", nil, slog.Default(), 0)
	a, a2, b := h.Register(1), h.Register(1), h.Register(2)
	announced := -1
	h.PublishEach([]int64{1, 2, 3}, func(n int) {
		announced = n
		for _, w := range []*Waiter{a, a2, b} {
			if len(w.c) != 0 {
				t.Error("a waiter woke before the count was told")
			}
		}
	})
	if announced != 2 {
		t.Fatalf("told %d waiters, want 2 (queues 1 and 2 have waiters, 3 none)", announced)
	}
	if len(a.c) != 1 || len(b.c) != 1 || len(a2.c) != 0 {
		t.Fatalf("woken: head of 1 %d, second of 1 %d, head of 2 %d; want the heads only", len(a.c), len(a2.c), len(b.c))
	}
	if h.pending[1] != 1 || h.pending[2] != 1 || h.pending[3] != 1 {
		t.Fatalf("notifications pending %v, want one for each queue", h.pending)
	}
}
