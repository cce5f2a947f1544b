package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/skipq/skipq/client"
)

const queuesUsage = `skipq queues list [--prefix P]
       skipq queues get QUEUE
       skipq queues create QUEUE [--visibility S] [--wait S] [--delay S] [--expiration S]
                                 [--max-receive N] [--dlq QUEUE] [--dedup-window S] [--fifo]
                                 [--retain-acked S] [--trace[=false]]
       skipq queues delete QUEUE
       skipq queues purge QUEUE`

// queueJSON is a queue as the verbs print it with --json: the HTTP API's
// queue object, plus "created" for queues create.
type queueJSON struct {
	client.Queue
	Created *bool `json:"created,omitempty"`
}

// cmdQueues: skipq queues list|get|create|delete|purge.
func cmdQueues(ctx context.Context, args []string) error {
	fs, o := cliFlags("queues")
	prefix := fs.String("prefix", "", "list: only queues whose name starts with `prefix`")
	var s client.QueueSettings
	visibility, wait, delay := &secondsFlag{}, &secondsFlag{}, &secondsFlag{}
	expiration, dedup, retain := &secondsFlag{}, &secondsFlag{}, &secondsFlag{}
	maxReceive, dlq, trace := &intFlag{}, &stringFlag{}, &boolFlag{}
	fs.Var(visibility, "visibility", "create: lease of a receive, in `seconds` (or a duration: 30s, 5m) (60)")
	fs.Var(wait, "wait", "create: long-poll wait of a receive, in `seconds` (1)")
	fs.Var(delay, "delay", "create: delay of a send, in `seconds` (0)")
	fs.Var(expiration, "expiration", "create: expiration of a message, in `seconds` (0 = never)")
	fs.Var(maxReceive, "max-receive", "create: most `deliveries` before dead-lettering (0 = the server's limit)")
	fs.Var(dlq, "dlq", "create: dead-letter `queue` (\"\" = discard)")
	fs.Var(dedup, "dedup-window", "create: how long a messageId is remembered, in `seconds` (300)")
	fifo := fs.Bool("fifo", false, "create: a FIFO queue (message groups, in order); fixed once created")
	fs.Var(retain, "retain-acked", "create: how long an acked message is kept in state acked, in `seconds` (0 = removed at once)")
	fs.Var(trace, "trace", "create: record the history of messages sent from now on (--trace=false stops) (false)")
	pos, err := cliParse(fs, args, queuesUsage)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErr("queues", "queues needs a verb")
	}
	verb, pos := pos[0], pos[1:]
	settingFlags := visibility.v != nil || wait.v != nil || delay.v != nil || expiration.v != nil ||
		dedup.v != nil || maxReceive.v != nil || dlq.v != nil || retain.v != nil || trace.v != nil || *fifo
	if settingFlags && verb != "create" {
		return usageErr("queues", "queue settings are flags of queues create")
	}
	if *prefix != "" && verb != "list" {
		return usageErr("queues", "--prefix is a flag of queues list")
	}
	wantArgs := 1
	if verb == "list" {
		wantArgs = 0
	}
	switch verb {
	case "list", "get", "create", "delete", "purge":
	default:
		return usageErr("queues", "unknown verb queues %s", verb)
	}
	if len(pos) != wantArgs {
		if wantArgs == 0 {
			return usageErr("queues", "queues list takes no arguments")
		}
		return usageErr("queues", "queues %s needs one queue name", verb)
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	out := os.Stdout
	switch verb {
	case "list":
		return queuesList(ctx, c, o, *prefix, out)
	case "get":
		q, err := c.GetQueue(ctx, pos[0])
		if err != nil {
			return apiError(err)
		}
		if o.json {
			return writeJSON(out, queueJSON{Queue: q})
		}
		return printQueue(out, q)
	case "create":
		s.VisibilitySeconds, s.ReceiveWaitSeconds, s.DelaySeconds = visibility.v, wait.v, delay.v
		s.ExpirationSeconds, s.DedupWindowSeconds = expiration.v, dedup.v
		s.MaxReceiveCount, s.DeadLetterQueue, s.RetainAckedSeconds = maxReceive.v, dlq.v, retain.v
		s.Trace = trace.v
		if *fifo {
			s.FIFO = fifo
		}
		q, created, err := c.PutQueue(ctx, pos[0], s)
		if err != nil {
			return apiError(err)
		}
		if o.json {
			j := queueJSON{Queue: q}
			j.Created = &created
			return writeJSON(out, j)
		}
		what := "updated"
		if created {
			what = "created"
		}
		fmt.Fprintf(out, "%s queue %s\n", what, q.Name)
		return printQueue(out, q)
	case "delete":
		if err := c.DeleteQueue(ctx, pos[0]); err != nil {
			return apiError(err)
		}
		if o.json {
			return writeJSON(out, map[string]any{"queue": pos[0], "deleted": true})
		}
		fmt.Fprintf(out, "deleted queue %s\n", pos[0])
		return nil
	default: // purge
		n, err := c.PurgeQueue(ctx, pos[0])
		if err != nil {
			return apiError(err)
		}
		if o.json {
			return writeJSON(out, map[string]any{"queue": pos[0], "purged": n})
		}
		fmt.Fprintf(out, "purged %d %s from %s\n", n, plural(n, "message"), pos[0])
		return nil
	}
}

func queuesList(ctx context.Context, c *client.Client, o *cliOptions, prefix string, out io.Writer) error {
	var qs []client.Queue
	for q, err := range c.Queues(ctx, prefix) {
		if err != nil {
			return apiError(err)
		}
		qs = append(qs, q)
	}
	if o.json {
		list := make([]queueJSON, len(qs))
		for i, q := range qs {
			list[i] = queueJSON{Queue: q}
		}
		return writeJSON(out, map[string]any{"queues": list})
	}
	if len(qs) == 0 {
		fmt.Fprintln(os.Stderr, "no queues")
		return nil
	}
	tw := newTable(out)
	fmt.Fprintln(tw, "NAME\tVISIBILITY\tWAIT\tDELAY\tEXPIRATION\tMAX-RECEIVE\tDLQ\tDEDUP-WINDOW\tCREATED")
	for _, q := range qs {
		fmt.Fprintf(tw, "%s\t%ds\t%ds\t%ds\t%s\t%s\t%s\t%ds\t%s\n", q.Name, q.VisibilitySeconds,
			q.ReceiveWaitSeconds, q.DelaySeconds, expirationText(q.ExpirationSeconds),
			maxReceiveText(q.MaxReceiveCount), orDash(q.DeadLetterQueue), q.DedupWindowSeconds,
			humanTime(&q.CreatedAt))
	}
	return tw.Flush()
}

// printQueue prints one queue as a two-column table, with its counts when
// it has them.
func printQueue(out io.Writer, q client.Queue) error {
	tw := newTable(out)
	dlq := q.DeadLetterQueue
	if dlq == "" {
		dlq = "- (over-limit messages are discarded)"
	}
	rows := [][2]string{
		{"name", q.Name},
		{"created", humanTime(&q.CreatedAt)},
		{"visibility", fmt.Sprintf("%ds", q.VisibilitySeconds)},
		{"receive wait", fmt.Sprintf("%ds", q.ReceiveWaitSeconds)},
		{"delay", fmt.Sprintf("%ds", q.DelaySeconds)},
		{"expiration", expirationText(q.ExpirationSeconds)},
		{"max receive", maxReceiveText(q.MaxReceiveCount)},
		{"dead-letter queue", dlq},
		{"dedup window", fmt.Sprintf("%ds", q.DedupWindowSeconds)},
		{"fifo", strconv.FormatBool(q.FIFO)},
		{"retain acked", fmt.Sprintf("%ds", q.RetainAckedSeconds)},
		{"trace", strconv.FormatBool(q.Trace)},
	}
	if s := q.Stats; s != nil {
		rows = append(rows,
			[2]string{"available", strconv.FormatInt(s.Available, 10)},
			[2]string{"delayed", strconv.FormatInt(s.Delayed, 10)},
			[2]string{"in flight", strconv.FormatInt(s.InFlight, 10)},
			[2]string{"total", strconv.FormatInt(s.Total, 10)},
			[2]string{"acked (retained)", strconv.FormatInt(s.Acked, 10)},
			[2]string{"groups", strconv.FormatInt(s.Groups, 10)},
			[2]string{"oldest available", humanTime(s.OldestAvailableAt)})
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s:\t%s\n", r[0], r[1])
	}
	return tw.Flush()
}

func expirationText(s int) string {
	if s == 0 {
		return "never"
	}
	return fmt.Sprintf("%ds", s)
}

func maxReceiveText(n int) string {
	if n == 0 {
		return "server limit"
	}
	return strconv.Itoa(n)
}

func plural(n int64, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
