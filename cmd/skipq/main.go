// Command skipq is the skipq message-queue service: `serve` runs a node,
// `dev` runs one on a private PostgreSQL, `migrate` manages the schema.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

const usage = `skipq: a message queue that lives in PostgreSQL

Usage:
  skipq serve   [flags]          run a node (config from SKIPQ_* environment variables)
  skipq dev     [flags]          run a node on a private PostgreSQL under ./.skipq/ (auth off)
  skipq migrate up|down|status   manage the schema (needs SKIPQ_DATABASE_URL)
  skipq keys create --tenant T --role read|write|admin --name N
  skipq keys list | revoke ID    manage API keys (needs SKIPQ_DATABASE_URL)

Run 'skipq COMMAND -h' for a command's flags.
`

// errUsage marks errors that are the caller's words being off (exit 2).
var errUsage = errors.New("usage")

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	slog.SetDefault(log)
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "serve":
		err = cmdServe(ctx, args, log)
	case "dev":
		err = cmdDev(ctx, args, log)
	case "migrate":
		err = cmdMigrate(ctx, args)
	case "keys":
		err = cmdKeys(ctx, args)
	case "help", "-h", "--help":
		fmt.Print(usage)
		return
	default:
		err = fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		fmt.Fprintf(os.Stderr, "skipq: %v\n\n%s", err, usage)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "skipq: %v\n", err)
		os.Exit(1)
	}
}
