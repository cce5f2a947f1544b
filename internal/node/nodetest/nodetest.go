// Package nodetest runs skipq nodes in-process for tests.
package nodetest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/node"
	"github.com/skipq/skipq/internal/testdb"
)

// Start runs a node on dbURL (auth off, a random loopback port, the rest as
// configure sets it) until the test ends, and returns its base URL. Set
// SKIPQ_TEST_LOG to see the node's log on stderr.
//
// With SKIPQ_TEST_PGBOUNCER=1 the node runs as it would behind PgBouncer in
// production (docs/OPERATIONS.md#running-behind-pgbouncer): its database URL goes through PgBouncer 1.18 in
// transaction-pooling mode (testdb.ThroughPgBouncer) and its LISTEN
// connection (ListenerDatabaseURL) goes direct to dbURL. The caller's own
// connections to dbURL stay direct.
func Start(t testing.TB, dbURL string, configure ...func(*node.Config)) string {
	t.Helper()
	cfg := node.DefaultConfig()
	cfg.DatabaseURL = dbURL
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.Auth = "off"
	for _, f := range configure {
		f(&cfg)
	}
	if os.Getenv("SKIPQ_TEST_PGBOUNCER") == "1" {
		throughPgBouncer(t, &cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var logTo io.Writer = io.Discard
	if os.Getenv("SKIPQ_TEST_LOG") != "" {
		logTo = os.Stderr
	}
	log := slog.New(slog.NewJSONHandler(logTo, nil))
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx, cfg, log, func(a string) { addr <- a }) }()
	select {
	case a := <-addr:
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("node: %v", err)
			}
		})
		return "http://" + a
	case err := <-done:
		cancel()
		t.Fatalf("node did not start: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("node did not start in 30 s")
	}
	return ""
}

// throughPgBouncer points cfg's pool at the database through PgBouncer and
// its listener at the database directly, and quotes what went wrong in
// PgBouncer should the test fail.
func throughPgBouncer(t testing.TB, cfg *node.Config) {
	t.Helper()
	direct := cfg.DatabaseURL
	if cfg.ListenerDatabaseURL == "" {
		cfg.ListenerDatabaseURL = direct
	}
	pooled := testdb.ThroughPgBouncer(t, direct)
	if pooled == direct {
		return // not on the test server: see ThroughPgBouncer
	}
	// The plain URL, without default_query_exec_mode: the pool finds
	// the pooler by itself (db.NewPool).
	cfg.DatabaseURL = pooled
	if _, seen := bouncing.LoadOrStore(t, true); seen {
		return // the test's first node quotes the log for all of them
	}
	offset := testdb.PgBouncerLogOffset()
	t.Cleanup(func() { // after the test's nodes have stopped
		bouncing.Delete(t)
		if t.Failed() {
			t.Logf("SKIPQ_TEST_PGBOUNCER=1: the nodes' database URL went through PgBouncer 1.18 in transaction-pooling mode (%s), their listener's direct to PostgreSQL.%s",
				cfg.DatabaseURL, testdb.PgBouncerLog(offset))
		}
	})
}

// bouncing holds the tests whose nodes run behind PgBouncer.
var bouncing sync.Map
