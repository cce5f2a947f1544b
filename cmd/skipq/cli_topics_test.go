package main

import (
	"strings"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/testdb"
)

func TestCLITopics(t *testing.T) {
	c := newCLI(t, serve(t, testdb.New(t)))
	if out := c.ok("topics", "create", "orders"); !strings.HasPrefix(out, "created topic orders\n") {
		t.Errorf("topics create printed %q", out)
	}
	c.ok("topics", "subscribe", "orders", "billing")
	out := c.ok("topics", "subscribe", "orders", "eu", "--filter", "region=eu,uk")
	if !strings.HasPrefix(out, "subscribed eu to orders\n") || !strings.Contains(out, "eu (region=eu,uk)") ||
		!strings.Contains(out, "billing (every message)") {
		t.Errorf("topics subscribe printed\n%s", out)
	}
	if out := c.ok("publish", "orders", "hello", "--tag", "region=uk", "--id", "o1"); out != "published message o1 to orders: 2 groups\n" {
		t.Errorf("publish printed %q", out)
	}
	if out := c.ok("publish", "orders", "hello", "--tag", "region=uk", "--id", "o1"); out != "duplicate of message o1 to orders: 2 groups\n" {
		t.Errorf("a second publish printed %q", out)
	}
	if out := c.ok("receive", "eu", "--ack"); !strings.Contains(out, "hello") {
		t.Errorf("receive from a group printed %q", out)
	}
	out = c.ok("topics", "list")
	if !strings.Contains(out, "orders") || !strings.Contains(out, "SUBSCRIPTIONS") {
		t.Errorf("topics list printed\n%s", out)
	}
	c.ok("topics", "unsubscribe", "orders", "eu")
	if out := c.ok("topics", "get", "orders"); strings.Contains(out, "eu (") {
		t.Errorf("topics get after unsubscribe printed\n%s", out)
	}
	c.ok("topics", "delete", "orders")
	if got := c.fails(1, "publish", "orders", "late"); !strings.HasPrefix(got, "skipq: not_found: ") {
		t.Errorf("publish to a deleted topic: stderr %q", got)
	}
	c.fails(2, "topics", "subscribe", "orders")
}

// A topic that retains its messages, and a subscription that replays them.
func TestCLITopicReplay(t *testing.T) {
	c := newCLI(t, serve(t, testdb.New(t)))
	if out := c.ok("topics", "create", "audit", "--retain", "3600"); !strings.Contains(out, "retain:") || !strings.Contains(out, "3600s") {
		t.Errorf("topics create --retain printed\n%s", out)
	}
	c.ok("publish", "audit", "first")
	c.ok("topics", "subscribe", "audit", "late", "--replay-from", "2000-01-01T00:00:00Z")
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(c.ok("receive", "late", "--ack"), "first") {
		if time.Now().After(deadline) {
			t.Fatal("the replayed message never came")
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.fails(2, "topics", "subscribe", "audit", "x", "--replay-from", "yesterday")
	c.fails(2, "topics", "get", "audit", "--retain", "5")
}
