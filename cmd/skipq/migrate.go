package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/skipq/skipq/internal/migrations"
	"github.com/skipq/skipq/internal/node"
)

func cmdMigrate(ctx context.Context, args []string) error {
	cfg := node.DefaultConfig()
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	if err := cfg.Load(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err // -h: the flags were printed
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if cfg.DatabaseURL == "" {
		return fmt.Errorf("SKIPQ_DATABASE_URL (or DATABASE_URL) is required")
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: skipq migrate up|down|status", errUsage)
	}
	switch fs.Arg(0) {
	case "up":
		return migrations.Up(ctx, cfg.DatabaseURL)
	case "down":
		return migrations.Down(ctx, cfg.DatabaseURL)
	case "status":
		return migrations.Status(ctx, cfg.DatabaseURL, os.Stdout)
	}
	return fmt.Errorf("%w: unknown migrate command %q", errUsage, fs.Arg(0))
}
