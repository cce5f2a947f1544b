package apitest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/skipq/skipq/internal/node"
	"github.com/skipq/skipq/internal/testdb"
)

// deadDatabaseURL is a Postgres URL whose port refuses every connection.
func deadDatabaseURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "postgres://skipq@" + addr + "/skipq?connect_timeout=1"
}

// A node whose LISTEN connection cannot be made still hands a waiting
// receive what an SQL send (which only NOTIFYs) puts in its queue: the hub
// re-claims for the queue's head waiter every RecheckInterval while the
// listener is down (docs/DESIGN.md: a slow poll of at most 1 s). Each round's
// receive waits 4 s at most, which a 0.9 s poll meets easily; two rounds,
// because a node that fell back only to the 5 s safety recheck could meet
// the first by chance but not the second, which starts right after a
// recheck.
func TestListenerDownFallsBackToPolling(t *testing.T) {
	dbURL := testdb.New(t)
	n := startNode(t, dbURL, func(c *node.Config) {
		c.ListenerDatabaseURL = deadDatabaseURL(t)
		c.Migrate = false // migrations go over the listener's URL; testdb's database is migrated
	})
	// An existing queue: waiters of a missing one are woken on every recheck anyway.
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/fallback", nil)
	conn := connect(t, dbURL)
	for round := range 2 {
		got := n.receiveAsync(t, "fallback", map[string]any{"waitSeconds": 4})
		waitForWaiters(t, n)
		body := fmt.Sprint("by SQL ", round)
		if _, err := conn.Exec(context.Background(), "SELECT skipq.send('fallback', $1::text)", body); err != nil {
			t.Fatal(err)
		}
		if msgs := <-got; len(msgs) != 1 || msgs[0]["body"] != body {
			t.Fatalf("round %d: the waiting receive got %v; want the message sent by SQL", round, msgs)
		}
	}
}
