package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/skipq/skipq/internal/devpg"
	"github.com/skipq/skipq/internal/node"
)

// devDatabase is the database `skipq dev` serves from in its private cluster.
const devDatabase = "skipq"

// cmdDev runs a node on a private PostgreSQL cluster under ./.skipq/dev
// (created on first use, reused after), with auth off, on 127.0.0.1:8080.
// Ctrl-C stops the node, then the cluster.
func cmdDev(ctx context.Context, args []string, log *slog.Logger) error {
	cfg := node.DefaultConfig()
	cfg.ListenAddr = "127.0.0.1:8080"
	cfg.Auth = "off"
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	dir := fs.String("dir", ".skipq/dev", "the private cluster's directory")
	if err := cfg.Load(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err // -h: the flags were printed
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if _, err := devpg.EnsureBinaries(ctx, os.Stderr); err != nil {
		return err
	}
	cluster, err := devpg.Start(ctx, devpg.Options{Dir: *dir})
	if errors.Is(err, devpg.ErrAlreadyRunning) {
		return fmt.Errorf("another `skipq dev` (or what it left running) holds %s: stop it with Ctrl-C where it runs, or give this one its own -dir (%w)", *dir, err)
	}
	if err != nil {
		return err
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			log.Error("stopping the private PostgreSQL failed", "error", err)
		}
	}()
	if err := cluster.CreateDatabase(ctx, devDatabase); err != nil {
		return err
	}
	// If PostgreSQL dies under us, stop serving rather than answer 503s forever.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-cluster.Done():
			log.Error("the private PostgreSQL exited; stopping")
			cancel()
		case <-ctx.Done():
		}
	}()
	cfg.DatabaseURL = cluster.URL(devDatabase)
	if err := cfg.Validate(); err != nil {
		return err
	}
	return node.Run(ctx, cfg, log, func(addr string) {
		fmt.Fprint(os.Stderr, devBanner(cfg, addr))
	})
}

// devBanner is what `skipq dev` (and so `make run`) prints once it serves:
// where to point a client and a browser, and how auth is set.
func devBanner(cfg node.Config, addr string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nskipq dev is running (Ctrl-C stops it and its PostgreSQL)\n  API:      http://%s\n", addr)
	if cfg.Console {
		fmt.Fprintf(&b, "  console:  http://%s/console/\n", addr)
	}
	fmt.Fprintf(&b, "  database: %s\n", cfg.DatabaseURL)
	if cfg.Auth == "off" {
		b.WriteString("  auth:     off (`skipq dev -auth required` turns it on)\n")
	} else {
		b.WriteString("  auth:     required (a key: SKIPQ_DATABASE_URL=<the database above> skipq keys create --tenant T --role admin --name N)\n")
	}
	b.WriteString("\n")
	return b.String()
}
