package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"github.com/skipq/skipq/internal/node"
)

func cmdServe(ctx context.Context, args []string, log *slog.Logger) error {
	cfg := node.DefaultConfig()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	if err := cfg.Load(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err // -h: the flags were printed
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	return node.Run(ctx, cfg, log, nil)
}
