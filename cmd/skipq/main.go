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
	"strings"
	"syscall"
)

const usage = `skipq: a message queue that lives in PostgreSQL

Usage:
  skipq serve   [flags]          run a node (config from SKIPQ_* environment variables)
  skipq dev     [flags]          run a node on a private PostgreSQL under ./.skipq/ (auth off)
  skipq migrate up|down|status   manage the schema (needs SKIPQ_DATABASE_URL)
  skipq keys create --tenant T --role read|write|admin --name N
  skipq keys list | revoke ID | sqs-credentials ID
                                 manage API keys (needs SKIPQ_DATABASE_URL; 'skipq keys -h')

Client commands (HTTP to $SKIPQ_URL, default http://127.0.0.1:8080, with
$SKIPQ_API_KEY; --url and --api-key override them, --json prints JSON):
  skipq queues list [--prefix P] | get Q | create Q [settings] | delete Q | purge Q
  skipq send QUEUE [BODY|-]      send a message (BODY, or stdin)
  skipq topics list | get T | create T [--fifo] | delete T | subscribe T Q [--filter k=v] | unsubscribe T Q
  skipq publish TOPIC [BODY|-]   publish to every queue subscribed to TOPIC (send's flags)
  skipq receive QUEUE            receive messages (--max N --wait S --ack --peek -q)
  skipq ack|nack HANDLE...       settle received messages (nack --reason TEXT: why)
  skipq dlq list [--source Q] [--cause C] | redrive QUEUE [--to Q]
  skipq tail QUEUE               print messages as they arrive, until Ctrl-C
  skipq messages search          find messages across queues (--queue, --prefix, --state,
                                 --after, --before, --tag, --id; newest first)
  skipq messages history Q ID    what happened to a message (queues with --trace)

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
	case "queues":
		err = cmdQueues(ctx, args)
	case "send":
		err = cmdSend(ctx, args)
	case "topics":
		err = cmdTopics(ctx, args)
	case "publish":
		err = cmdPublish(ctx, args)
	case "receive":
		err = cmdReceive(ctx, args)
	case "ack", "nack":
		err = cmdSettle(ctx, cmd, args)
	case "dlq":
		err = cmdDLQ(ctx, args)
	case "tail":
		err = cmdTail(ctx, args)
	case "messages":
		err = cmdMessages(ctx, args)
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
		// The line that says what is off, and where to read more: a
		// verb's own errors name its -h; the rest, the command list.
		fmt.Fprintf(os.Stderr, "skipq: %v\n", err)
		if !strings.Contains(err.Error(), " -h'") {
			fmt.Fprintln(os.Stderr, "Run 'skipq -h' for the commands.")
		}
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "skipq: %v\n", err)
		os.Exit(1)
	}
}
