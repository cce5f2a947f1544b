package service

import (
	"log/slog"
	"testing"
)

// A wake-up that reaches a waiter as it leaves (its wait ended at the same
// moment) goes to the next waiter of the queue: with the listener up,
// nothing else would wake it before the safety recheck, seconds later.
func TestWakeUpOfALeavingWaiterIsPassedOn(t *testing.T) {
	s := &Service{hub: newHub("n", nil, slog.Default(), 0)}
	first, second := s.hub.register(7), s.hub.register(7)
	s.hub.wake(7, 1)
	s.leave(7, first)
	select {
	case <-second.c:
	default:
		t.Fatal("the next waiter was not woken")
	}
	// A waiter that leaves unwoken wakes nobody.
	third, fourth := s.hub.register(7), s.hub.register(7)
	s.leave(7, third)
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
	h := newHub("n", nil, slog.Default(), 0)
	head, next, missing := h.register(7), h.register(7), h.register(missingQueue)
	h.recheck(false)
	if len(head.c) != 0 || len(missing.c) != 1 {
		t.Fatalf("a partial recheck woke the head waiter (%d) or not the missing queue's (%d)", len(head.c), len(missing.c))
	}
	h.recheck(true)
	if len(head.c) != 1 || len(next.c) != 0 {
		t.Fatalf("a full recheck woke %d head and %d next waiters, want 1 and 0", len(head.c), len(next.c))
	}
}
