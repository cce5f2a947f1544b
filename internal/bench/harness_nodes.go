package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/skipq/skipq/internal/node"
)

// nodes is the set of nodes a scenario drives: in-process ones it started,
// or the running ones of Options.URLs.
type nodes struct {
	urls  []string
	stop  func()
	procs []*nodeProcess // the nodes' processes when they run in processes of their own
}

// at is the node serving worker i.
func (n *nodes) at(i int) string { return n.urls[i%len(n.urls)] }

// startNodes runs Options.Nodes in-process nodes on 127.0.0.1 (auth off,
// default configuration otherwise, then configure), or hands out
// Options.URLs. Each scenario gets fresh nodes, so one's pools and waiters
// do not colour the next.
func (e *env) startNodes(ctx context.Context, configure ...func(*node.Config)) (*nodes, error) {
	if len(e.o.URLs) > 0 {
		return &nodes{urls: e.o.URLs, stop: func() {}}, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	n := &nodes{}
	n.stop = func() {
		cancel()
		wg.Wait()
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	for i := 0; i < e.o.Nodes; i++ {
		cfg := benchNodeConfig(e.dbURL, e.o.IdleWaiters)
		for _, f := range configure {
			f(&cfg)
		}
		if err := cfg.Validate(); err != nil {
			n.stop()
			return nil, err
		}
		addr := make(chan string, 1)
		done := make(chan error, 1)
		wg.Go(func() { done <- node.Run(ctx, cfg, log, func(a string) { addr <- a }) })
		select {
		case a := <-addr:
			n.urls = append(n.urls, "http://"+a)
		case err := <-done:
			n.stop()
			return nil, fmt.Errorf("node %d did not start: %w", i, err)
		case <-time.After(30 * time.Second):
			n.stop()
			return nil, fmt.Errorf("node %d did not start in 30s", i)
		}
	}
	return n, nil
}

// benchNodeConfig is a bench node's configuration: on 127.0.0.1, auth off,
// the defaults otherwise.
func benchNodeConfig(dbURL string, idleWaiters int) node.Config {
	cfg := node.DefaultConfig()
	cfg.DatabaseURL = dbURL
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.Auth = "off"
	cfg.Migrate = false // the database is migrated already
	// The idle scenario parks IdleWaiters long polls on one node; the
	// default cap must not refuse some of what it measures.
	cfg.Limits.MaxWaiters = max(cfg.Limits.MaxWaiters, idleWaiters)
	return cfg
}
