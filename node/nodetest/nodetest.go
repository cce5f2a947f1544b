// Package nodetest runs skipq nodes in-process for tests.
package nodetest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/skipq/skipq/node"
)

// Start runs a node on dbURL (auth off, a random loopback port, the rest as
// configure sets it) until the test ends, and returns its base URL. Set
// SKIPQ_TEST_LOG to see the node's log on stderr.
func Start(t testing.TB, dbURL string, configure ...func(*node.Config)) string {
	t.Helper()
	cfg := node.DefaultConfig()
	cfg.DatabaseURL = dbURL
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.Auth = "off"
	for _, f := range configure {
		f(&cfg)
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
