package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/skipq/skipq/client"
	"github.com/skipq/skipq/wire"
)

const messagesUsage = `skipq messages search [--queue Q]... [--prefix P] [--state S]... [--after T] [--before T]
                      [--tag key=value]... [--id ID] [--group-id G] [--limit N]
       skipq messages history QUEUE MESSAGE-ID`

// listFlag is a repeatable string flag.
type listFlag []string

func (f *listFlag) String() string     { return strings.Join(*f, ",") }
func (f *listFlag) Set(s string) error { *f = append(*f, s); return nil }

// cmdMessages: skipq messages search (docs/API.md#search, GET /v1/messages) and
// skipq messages history (docs/API.md#history).
func cmdMessages(ctx context.Context, args []string) error {
	fs, o := cliFlags("messages")
	var queues, states listFlag
	tags := tagsFlag{}
	fs.Var(&queues, "queue", "only messages of `queue` (repeatable, up to 20)")
	prefix := fs.String("prefix", "", "only messages of queues whose name starts with `prefix`")
	fs.Var(&states, "state", "only messages in `state`: available, delayed, in_flight, acked, or dead_lettered (dead letters not received from their dead-letter queue since; their state is available there) (repeatable)")
	after := fs.String("after", "", "only messages sent at or after `time` (RFC 3339)")
	before := fs.String("before", "", "only messages sent before `time` (RFC 3339)")
	fs.Var(tags, "tag", "only messages with the tag `key=value` (repeatable: all must match)")
	id := fs.String("id", "", "only the message with this `messageId`")
	group := fs.String("group-id", "", "only the messages of this FIFO `group`")
	limit := fs.Int("limit", 100, "most messages to print, newest first (0 = all)")
	pos, err := cliParse(fs, args, messagesUsage)
	if err != nil {
		return err
	}
	if len(pos) > 0 && pos[0] == "history" {
		searchFlags := false
		fs.Visit(func(f *flag.Flag) { searchFlags = searchFlags || !commonFlags[f.Name] })
		switch {
		case len(pos) != 3:
			return usageErr("messages", "messages history needs a queue name and a message id")
		case searchFlags:
			return usageErr("messages", "messages history takes no search flags")
		}
		c, err := o.client()
		if err != nil {
			return err
		}
		return messageHistory(ctx, c, o, pos[1], pos[2])
	}
	switch {
	case len(pos) != 1 || pos[0] != "search":
		return usageErr("messages", "messages needs a verb: search (no arguments) or history QUEUE MESSAGE-ID")
	case *limit < 0:
		return usageErr("messages", "--limit must not be negative")
	}
	opts := client.SearchOptions{Queues: queues, QueuePrefix: *prefix, MessageID: *id, GroupID: *group}
	for _, st := range states {
		opts.States = append(opts.States, client.State(st))
	}
	if len(tags) > 0 {
		opts.Tags = tags
	}
	for _, t := range []struct {
		flag, raw string
		to        *time.Time
	}{{"--after", *after, &opts.SentAfter}, {"--before", *before, &opts.SentBefore}} {
		if t.raw == "" {
			continue
		}
		if *t.to, err = time.Parse(time.RFC3339Nano, t.raw); err != nil {
			return usageErr("messages", "%s: %q is not an RFC 3339 time", t.flag, t.raw)
		}
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	var msgs []client.BrowsedMessage
	more := false
	for m, err := range c.Search(ctx, opts) {
		if err != nil {
			return apiError(err)
		}
		if *limit > 0 && len(msgs) == *limit {
			more = true
			break
		}
		msgs = append(msgs, m)
	}
	if more {
		fmt.Fprintf(os.Stderr, "showing the newest %d messages found; --limit 0 shows all\n", *limit)
	}
	if o.json {
		list := make([]messageJSON, len(msgs))
		for i, m := range msgs {
			list[i] = m.Wire()
			list[i].State = m.State
		}
		return writeJSON(os.Stdout, map[string]any{"messages": list})
	}
	if len(msgs) == 0 {
		fmt.Fprintln(os.Stderr, "no messages found")
		return nil
	}
	tw := newTable(os.Stdout)
	fmt.Fprintln(tw, "SENT\tQUEUE\tSTATE\tSEQUENCE\tMESSAGE-ID\tGROUP\tTAGS\tBODY")
	for _, m := range msgs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", humanTime(&m.SentAt), m.Queue, m.State, m.Sequence,
			m.MessageID, orDash(m.GroupID), tagsPreview(m.Tags), bodyPreview(m.Body, m.Binary))
	}
	return tw.Flush()
}

// messageHistory prints a message's history (docs/API.md#history), oldest first: a
// table with each event's type-specific fields as DETAIL, or with --json
// the API's {"events": [...]}.
func messageHistory(ctx context.Context, c *client.Client, o *cliOptions, queue, id string) error {
	events, err := c.History(ctx, queue, id)
	if err != nil {
		return apiError(err)
	}
	if events == nil {
		events = []client.HistoryEvent{}
	}
	if o.json {
		return writeJSON(os.Stdout, wire.History{Events: events})
	}
	if len(events) == 0 {
		fmt.Fprintln(os.Stderr, "no history: the message was not sent while its queue's trace setting was on")
		return nil
	}
	tw := newTable(os.Stdout)
	fmt.Fprintln(tw, "AT\tQUEUE\tTYPE\tKEY\tDETAIL")
	for _, e := range events {
		key := "-"
		if e.KeyID != nil {
			key = strconv.FormatInt(*e.KeyID, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.At.UTC().Format(milliTime), orDash(e.Queue), e.Type, key, historyDetail(e))
	}
	return tw.Flush()
}

// milliTime is a history event's time in a table: a message's events are
// often milliseconds apart.
const milliTime = "2006-01-02T15:04:05.000Z07:00"

// historyDetail is an event's optional fields as name=value, in the order
// of its life (the count and lease of a receive, then why and where it
// went); the reason quoted, as it is free text. "-" when it has none.
func historyDetail(e client.HistoryEvent) string {
	var parts []string
	if e.ReceiveCount != nil {
		parts = append(parts, "receiveCount="+strconv.Itoa(*e.ReceiveCount))
	}
	if e.VisibleUntil != nil {
		parts = append(parts, "visibleUntil="+e.VisibleUntil.UTC().Format(milliTime))
	}
	if e.Cause != nil {
		parts = append(parts, "cause="+*e.Cause)
	}
	if e.Reason != nil {
		parts = append(parts, "reason="+strconv.Quote(*e.Reason))
	}
	if e.ToQueue != nil {
		parts = append(parts, "toQueue="+*e.ToQueue)
	}
	if e.NewMessageID != nil {
		parts = append(parts, "newMessageId="+*e.NewMessageID)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}
