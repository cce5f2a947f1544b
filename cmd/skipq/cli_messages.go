package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"

	"github.com/skipq/skipq/client"
)

const sendUsage = `skipq send QUEUE [BODY|-] [--delay S] [--expiration S] [--tag k=v]... [--id ID]
                  [--metadata M] [--client-id C] [--max-receive N] [--dlq QUEUE] [--binary] [--group G]
                  [--lines [--non-atomic]] [--raw]
  The body is BODY, or stdin when BODY is "-" or absent and stdin is not a terminal;
  one trailing newline of stdin is dropped (echo adds it), unless --raw.
  With --lines each non-empty line of it is a message (the other flags apply to each),
  sent in batches of up to 1,000, each all or nothing; --non-atomic stores every valid
  message and reports each line that failed.`

const receiveUsage = `skipq receive QUEUE [--max N] [--per-group N] [--wait S] [--visibility S] [--ack | --peek] [-q]`

// maxStdinBody bounds what send reads from stdin: the service's largest
// request (SKIPQ_MAX_REQUEST_BYTES' default); its message limit is lower.
const maxStdinBody = 16 << 20

// sendJSON is what send prints with --json: the send's result.
type sendJSON struct {
	Queue string `json:"queue"`
	client.SendResult
}

// messageFlags are the flags of a message, send's and publish's.
type messageFlags struct {
	delay, expiration      *secondsFlag
	maxReceive             *intFlag
	dlq                    *stringFlag
	tags                   tagsFlag
	id, metadata, clientID *string
	group                  *string
	binary, raw            *bool
}

// addMessageFlags registers them on fs; to names the queue or topic the
// message goes to, for the help of --group.
func addMessageFlags(fs *flag.FlagSet, to string) *messageFlags {
	f := &messageFlags{delay: &secondsFlag{}, expiration: &secondsFlag{}, maxReceive: &intFlag{},
		dlq: &stringFlag{}, tags: tagsFlag{}}
	fs.Var(f.delay, "delay", "delay in `seconds` (or a duration: 30s, 5m; default: the queue's)")
	fs.Var(f.expiration, "expiration", "expiration in `seconds` after the delay, 0 = never (default: the queue's)")
	fs.Var(f.tags, "tag", "a tag `key=value` (repeatable)")
	f.id = fs.String("id", "", "messageId, the idempotency `key` (default: a server UUIDv7)")
	f.metadata = fs.String("metadata", "", "metadata text")
	f.clientID = fs.String("client-id", "", "clientId")
	fs.Var(f.maxReceive, "max-receive", "most `deliveries` before dead-lettering (0 = the queue's)")
	fs.Var(f.dlq, "dlq", "dead-letter `queue` (\"\" = discard; default: the queue's)")
	f.binary = fs.Bool("binary", false, "send the body as bytes (base64 on the wire)")
	f.group = fs.String("group", "", "the message's `group` (required on a FIFO "+to+")")
	f.raw = fs.Bool("raw", false, "keep a trailing newline of a body read from stdin")
	return f
}

// message is the message the flags and the body argument (pos[1], "-" or
// none: stdin unless it is a terminal) describe.
func (f *messageFlags) message(verb string, pos []string) (client.Message, error) {
	var body []byte
	switch {
	case len(pos) == 2 && pos[1] != "-":
		body = []byte(pos[1])
	case len(pos) == 2 || !term.IsTerminal(int(os.Stdin.Fd())):
		var err error
		if body, err = io.ReadAll(io.LimitReader(os.Stdin, maxStdinBody+1)); err != nil {
			return client.Message{}, fmt.Errorf("reading the body from stdin: %w", err)
		}
		if len(body) > maxStdinBody {
			return client.Message{}, fmt.Errorf("the body on stdin is over %d MiB", maxStdinBody>>20)
		}
		if !*f.raw {
			// `echo '{"orderId": 7}' | skipq send q -` means the JSON, not
			// the JSON and the newline echo ends its line with.
			body = bytes.TrimSuffix(bytes.TrimSuffix(body, []byte("\n")), []byte("\r"))
		}
	case *f.metadata == "":
		return client.Message{}, usageErr(verb, "%s needs a body: an argument, or - for stdin", verb)
	}
	m := client.Message{
		Body: body, Binary: *f.binary, Metadata: *f.metadata, ClientID: *f.clientID, MessageID: *f.id,
		DelaySeconds: f.delay.v, ExpirationSeconds: f.expiration.v, MaxReceiveCount: f.maxReceive.v,
		DeadLetterQueue: f.dlq.v, GroupID: *f.group,
	}
	if len(f.tags) > 0 {
		m.Tags = f.tags
	}
	return m, nil
}

// cmdSend: skipq send QUEUE [BODY|-].
func cmdSend(ctx context.Context, args []string) error {
	fs, o := cliFlags("send")
	f := addMessageFlags(fs, "queue; creates a missing queue as FIFO")
	lines := fs.Bool("lines", false, "each non-empty line of the body is a message, sent in batches")
	nonAtomic := fs.Bool("non-atomic", false, "with --lines: store every valid message, report each line that failed")
	pos, err := cliParse(fs, args, sendUsage)
	if err != nil {
		return err
	}
	switch {
	case len(pos) < 1 || len(pos) > 2:
		return usageErr("send", "send needs a queue and at most one body")
	case *lines && *f.id != "":
		return usageErr("send", "--id names one message; --lines sends many")
	case *nonAtomic && !*lines:
		return usageErr("send", "--non-atomic is a flag of --lines")
	}
	m, err := f.message("send", pos)
	if err != nil {
		return err
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	if *lines {
		return sendLines(ctx, c, o, pos[0], m, *nonAtomic)
	}
	res, err := c.Send(ctx, pos[0], m)
	if err != nil {
		return apiError(err)
	}
	if o.json {
		return writeJSON(os.Stdout, sendJSON{Queue: pos[0], SendResult: res})
	}
	what := "sent"
	if res.Duplicate {
		what = "duplicate of"
	}
	fmt.Printf("%s message %s (sequence %d) to %s", what, res.MessageID, res.Sequence, pos[0])
	if res.DelayedTo != nil {
		fmt.Printf(", delayed to %s", humanTime(res.DelayedTo))
	}
	if res.ExpiresAt != nil {
		fmt.Printf(", expires at %s", humanTime(res.ExpiresAt))
	}
	fmt.Println()
	return nil
}

// cmdReceive: skipq receive QUEUE.
func cmdReceive(ctx context.Context, args []string) error {
	fs, o := cliFlags("receive")
	maxN := fs.Int("max", 1, "most `messages` to receive (1 … 1024)")
	perGroup := fs.Int("per-group", 0, "FIFO queues: most `messages` from one group (1 … 10; default 1)")
	wait, visibility := &secondsFlag{}, &secondsFlag{}
	fs.Var(wait, "wait", "long-poll wait in `seconds`, 0 = answer at once (default: the queue's)")
	fs.Var(visibility, "visibility", "lease in `seconds` (default: the queue's)")
	ack := fs.Bool("ack", false, "remove what is received (autoAck: no receipt handles)")
	peek := fs.Bool("peek", false, "look without receiving: no receipt handles, nothing changes")
	var quiet bool
	fs.BoolVar(&quiet, "q", false, "print only the receipt handles (message ids with --ack or --peek), one a line")
	fs.BoolVar(&quiet, "quiet", false, "the same as -q")
	pos, err := cliParse(fs, args, receiveUsage)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 1:
		return usageErr("receive", "receive needs one queue name")
	case *ack && *peek:
		return usageErr("receive", "--ack and --peek exclude each other")
	case *peek && visibility.v != nil:
		return usageErr("receive", "a peek takes no --visibility")
	case *maxN < 1:
		return usageErr("receive", "--max must be at least 1")
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	var msgs []messageJSON
	var stored []client.StoredMessage
	var decodeErr error // a body that did not decode: what was claimed is still printed
	if *peek {
		stored, err = c.Peek(ctx, pos[0], client.PeekOptions{MaxMessages: *maxN, WaitSeconds: wait.v})
		if err != nil {
			return apiError(err)
		}
		for _, m := range stored {
			msgs = append(msgs, m.Wire())
		}
	} else {
		rs, err := c.Receive(ctx, pos[0], client.ReceiveOptions{MaxMessages: *maxN, WaitSeconds: wait.v,
			VisibilitySeconds: visibility.v, AutoAck: *ack, MaxMessagesPerGroup: *perGroup})
		for _, r := range rs { // a decode error still returns what was claimed
			j := r.Wire()
			if r.ReceiptHandle != "" {
				j.ReceiptHandle = &r.ReceiptHandle
			}
			msgs = append(msgs, j)
			stored = append(stored, r.StoredMessage)
		}
		if err != nil && len(rs) == 0 {
			return apiError(err)
		}
		decodeErr = err
	}
	if err := printReceived(o, quiet, !*peek && !*ack, msgs, stored); err != nil {
		return err
	}
	if len(msgs) == 0 && decodeErr == nil {
		// A receive of a missing queue is an empty answer over HTTP (a
		// queue is created by its first send); a typo should not look like
		// an empty queue, so the empty answer costs one lookup.
		if _, err := c.GetQueue(ctx, pos[0]); client.IsNotFound(err) {
			fmt.Fprintf(os.Stderr, "queue %q does not exist (yet): a send creates it\n", pos[0])
		}
	}
	return apiError(decodeErr)
}

// printReceived prints what receive got: JSON, handles only (-q), or a table.
func printReceived(o *cliOptions, quiet, withHandles bool, msgs []messageJSON, stored []client.StoredMessage) error {
	if msgs == nil {
		msgs = []messageJSON{}
	}
	switch {
	case o.json:
		return writeJSON(os.Stdout, map[string]any{"messages": msgs})
	case quiet:
		for _, m := range msgs {
			if m.ReceiptHandle != nil {
				fmt.Println(*m.ReceiptHandle)
			} else {
				fmt.Println(m.MessageID)
			}
		}
		return nil
	case len(msgs) == 0:
		fmt.Fprintln(os.Stderr, "no messages")
		return nil
	}
	tw := newTable(os.Stdout)
	header := "SEQUENCE\tMESSAGE-ID\tGROUP\tRECEIVES\tTAGS\tBODY"
	if withHandles {
		header += "\tRECEIPT-HANDLE"
	}
	fmt.Fprintln(tw, header)
	for i, m := range stored {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s", m.Sequence, m.MessageID, orDash(m.GroupID), m.ReceiveCount,
			tagsPreview(m.Tags), bodyPreview(m.Body, m.Binary))
		if withHandles {
			fmt.Fprintf(tw, "\t%s", orDash(deref(msgs[i].ReceiptHandle)))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// cmdSettle: skipq ack HANDLE... | skipq nack [--reason TEXT] HANDLE...
func cmdSettle(ctx context.Context, verb string, args []string) error {
	fs, o := cliFlags(verb)
	usage := "skipq ack HANDLE..."
	var reason *string
	if verb == "nack" {
		usage = "skipq nack [--reason TEXT] HANDLE..."
		reason = fs.String("reason", "", "why (recorded as the messages' lastFailure; at most 1024 bytes)")
	}
	pos, err := cliParse(fs, args, usage)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErr(verb, "%s needs at least one receipt handle", verb)
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	one, all := c.Ack, c.AckAll
	past := "acked"
	switch {
	case verb == "nack" && *reason != "":
		one = func(ctx context.Context, h string) error { return c.NackWithReason(ctx, h, *reason) }
		all = func(ctx context.Context, hs []string) (client.SettleResult, error) {
			return c.NackAllWithReason(ctx, hs, *reason)
		}
		past = "nacked"
	case verb == "nack":
		one, all, past = c.Nack, c.NackAll, "nacked"
	}
	res := client.SettleResult{Failed: []client.SettleFailure{}} // what --json prints
	if len(pos) == 1 {
		// The single form: a stale handle is an error with the server's message.
		if err := one(ctx, pos[0]); err != nil {
			return apiError(err)
		}
		res.Succeeded = 1
	} else {
		r, err := all(ctx, pos)
		if err != nil {
			return apiError(err)
		}
		res.Succeeded, res.Failed = r.Succeeded, append(res.Failed, r.Failed...)
	}
	if o.json {
		if err := writeJSON(os.Stdout, res); err != nil {
			return err
		}
	} else {
		fmt.Printf("%s %d of %d %s\n", past, res.Succeeded, len(pos), plural(int64(len(pos)), "message"))
		for _, f := range res.Failed {
			fmt.Fprintf(os.Stderr, "  %s: %s: %s\n", f.ReceiptHandle, f.Code, f.Message)
		}
	}
	if n := len(res.Failed); n > 0 {
		return fmt.Errorf("%d of %d receipt %s settled nothing", n, len(pos), plural(int64(len(pos)), "handle"))
	}
	return nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
