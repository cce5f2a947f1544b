package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/skipq/skipq/client"
)

const topicsUsage = `skipq topics list
       skipq topics get TOPIC
       skipq topics create TOPIC [--fifo] [--dedup-window S] [--retain S]
       skipq topics delete TOPIC
       skipq topics subscribe TOPIC QUEUE [--filter key=v1,v2]... [--replay-from TIME]
       skipq topics unsubscribe TOPIC QUEUE`

const publishUsage = `skipq publish TOPIC [BODY|-] [--delay S] [--expiration S] [--tag k=v]... [--id ID]
                     [--metadata M] [--client-id C] [--max-receive N] [--dlq QUEUE] [--binary] [--group G] [--raw]
  Every queue subscribed to TOPIC whose filter matches gets the message, or none does.
  The body is BODY, or stdin when BODY is "-" or absent and stdin is not a terminal.`

// filterFlag collects --filter key=v1,v2 into a subscription's filter.
type filterFlag map[string][]string

func (f filterFlag) String() string { return "" }

func (f filterFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" || v == "" {
		return fmt.Errorf("want key=value[,value...], got %q", s)
	}
	f[k] = append(f[k], strings.Split(v, ",")...)
	return nil
}

// cmdTopics: skipq topics list|get|create|delete|subscribe|unsubscribe.
func cmdTopics(ctx context.Context, args []string) error {
	fs, o := cliFlags("topics")
	fifo := fs.Bool("fifo", false, "create: a FIFO topic (its messages name groups, its queues are FIFO); fixed once created")
	dedup := &secondsFlag{}
	fs.Var(dedup, "dedup-window", "create: how long a messageId is remembered, in `seconds` (300)")
	retain := &secondsFlag{}
	fs.Var(retain, "retain", "create: keep every published message this many `seconds` for replays (0)")
	filter := filterFlag{}
	fs.Var(filter, "filter", "subscribe: deliver only messages whose tag `key=v1,v2` is one of the values (repeatable: all must match)")
	replayFrom := fs.String("replay-from", "", "subscribe: a new subscription first gets the topic's retained messages published since this RFC 3339 `time`")
	pos, err := cliParse(fs, args, topicsUsage)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErr("topics", "topics needs a verb")
	}
	verb, pos := pos[0], pos[1:]
	want := map[string]int{"list": 0, "get": 1, "create": 1, "delete": 1, "subscribe": 2, "unsubscribe": 2}
	n, known := want[verb]
	switch {
	case !known:
		return usageErr("topics", "unknown verb topics %s", verb)
	case len(pos) != n:
		return usageErr("topics", "topics %s takes %d %s", verb, n, map[int]string{0: "arguments", 1: "argument", 2: "arguments"}[n])
	case (*fifo || dedup.v != nil || retain.v != nil) && verb != "create":
		return usageErr("topics", "--fifo, --dedup-window and --retain are flags of topics create")
	case (len(filter) > 0 || *replayFrom != "") && verb != "subscribe":
		return usageErr("topics", "--filter and --replay-from are flags of topics subscribe")
	}
	var from time.Time
	if *replayFrom != "" {
		if from, err = time.Parse(time.RFC3339Nano, *replayFrom); err != nil {
			return usageErr("topics", "--replay-from wants an RFC 3339 time (2026-12-01T10:00:00Z), got %q", *replayFrom)
		}
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	out := os.Stdout
	switch verb {
	case "list":
		var ts []client.TopicSummary
		for t, err := range c.Topics(ctx) {
			if err != nil {
				return apiError(err)
			}
			ts = append(ts, t)
		}
		if o.json {
			return writeJSON(out, map[string]any{"topics": ts})
		}
		if len(ts) == 0 {
			fmt.Fprintln(os.Stderr, "no topics")
			return nil
		}
		tw := newTable(out)
		fmt.Fprintln(tw, "NAME\tFIFO\tSUBSCRIPTIONS\tPUBLISHED\tDELIVERED\tUNROUTED\tCREATED")
		for _, t := range ts {
			fmt.Fprintf(tw, "%s\t%t\t%d\t%d\t%d\t%d\t%s\n", t.Name, t.FIFO, t.Subscriptions, t.Published, t.Delivered,
				t.Unrouted, humanTime(&t.CreatedAt))
		}
		return tw.Flush()
	case "delete":
		if err := c.DeleteTopic(ctx, pos[0]); err != nil {
			return apiError(err)
		}
		fmt.Fprintf(out, "deleted topic %s (its queues stay)\n", pos[0])
		return nil
	case "unsubscribe":
		if err := c.Unsubscribe(ctx, pos[0], pos[1]); err != nil {
			return apiError(err)
		}
		fmt.Fprintf(out, "unsubscribed %s from %s (the queue stays)\n", pos[1], pos[0])
		return nil
	}
	var t client.Topic
	what := ""
	switch verb {
	case "get":
		t, err = c.GetTopic(ctx, pos[0])
	case "create":
		s := client.TopicSettings{DedupWindowSeconds: dedup.v, RetainSeconds: retain.v}
		if *fifo {
			s.FIFO = fifo
		}
		var created bool
		t, created, err = c.PutTopic(ctx, pos[0], s)
		what = map[bool]string{true: "created topic " + pos[0], false: "updated topic " + pos[0]}[created]
	default: // subscribe
		var f *client.TopicFilter
		if len(filter) > 0 {
			f = &client.TopicFilter{Tags: filter}
		}
		var created bool
		if from.IsZero() {
			t, created, err = c.Subscribe(ctx, pos[0], pos[1], f)
		} else {
			t, created, err = c.SubscribeReplay(ctx, pos[0], pos[1], f, from)
		}
		what = map[bool]string{true: "subscribed ", false: "changed the filter of "}[created] + pos[1] + " to " + pos[0]
	}
	if err != nil {
		return apiError(err)
	}
	if o.json {
		return writeJSON(out, t)
	}
	if what != "" {
		fmt.Fprintln(out, what)
	}
	return printTopic(out, t)
}

// printTopic prints a topic as a two-column table, then its subscriptions.
func printTopic(out io.Writer, t client.Topic) error {
	tw := newTable(out)
	for _, r := range [][2]string{
		{"name", t.Name},
		{"created", humanTime(&t.CreatedAt)},
		{"fifo", strconv.FormatBool(t.FIFO)},
		{"dedup window", fmt.Sprintf("%ds", t.DedupWindowSeconds)},
		{"retain", retention(t.RetainSeconds)},
		{"published", strconv.FormatInt(t.Published, 10)},
		{"delivered", strconv.FormatInt(t.Delivered, 10)},
		{"unrouted", strconv.FormatInt(t.Unrouted, 10)},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", r[0], r[1])
	}
	for _, s := range t.Subscriptions {
		filter := "every message"
		if s.Filter != nil && len(s.Filter.Tags) > 0 {
			var parts []string
			for k, vs := range s.Filter.Tags {
				parts = append(parts, k+"="+strings.Join(vs, ","))
			}
			filter = strings.Join(parts, " ")
		}
		replaying := ""
		if s.ReplayFrom != nil {
			replaying = ", replaying from " + s.ReplayFrom.String()
		}
		fmt.Fprintf(tw, "subscription:\t%s (%s%s)\n", s.Queue, filter, replaying)
	}
	return tw.Flush()
}

// retention says how long a topic keeps its published messages.
func retention(seconds int) string {
	if seconds == 0 {
		return "none"
	}
	return fmt.Sprintf("%ds", seconds)
}

// cmdPublish: skipq publish TOPIC [BODY|-].
func cmdPublish(ctx context.Context, args []string) error {
	fs, o := cliFlags("publish")
	f := addMessageFlags(fs, "topic")
	pos, err := cliParse(fs, args, publishUsage)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return usageErr("publish", "publish needs a topic and at most one body")
	}
	m, err := f.message("publish", pos)
	if err != nil {
		return err
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	res, err := c.Publish(ctx, pos[0], m)
	if err != nil {
		return apiError(err)
	}
	if o.json {
		return writeJSON(os.Stdout, map[string]any{"topic": pos[0], "result": res})
	}
	what := "published"
	if res.Duplicate {
		what = "duplicate of"
	}
	fmt.Printf("%s message %s to %s: %d %s\n", what, res.MessageID, pos[0], res.DeliveredTo,
		plural(int64(res.DeliveredTo), "group"))
	return nil
}
