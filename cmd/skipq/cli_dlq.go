package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/skipq/skipq/client"
)

const dlqUsage = `skipq dlq list [--source QUEUE] [--cause nack|lease_expired] [--limit N]
       skipq dlq redrive QUEUE [--to QUEUE] [--batch N]`

// maxRedriveBatch is the most messages one bulk redrive request moves (docs/API.md).
const maxRedriveBatch = 10000

// cmdDLQ: skipq dlq list|redrive.
func cmdDLQ(ctx context.Context, args []string) error {
	fs, o := cliFlags("dlq")
	source := fs.String("source", "", "list: only messages dead-lettered from `queue`")
	cause := fs.String("cause", "", "list: only messages whose last delivery failed so (`nack` or lease_expired)")
	limit := fs.Int("limit", 100, "list: most messages to print, newest first (0 = all)")
	to := fs.String("to", "", "redrive: the destination `queue` (default: each message's source queue)")
	batch := fs.Int("batch", maxRedriveBatch, "redrive: `messages` per request (1 … 10000)")
	pos, err := cliParse(fs, args, dlqUsage)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErr("dlq", "dlq needs a verb: list or redrive")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch verb := pos[0]; verb {
	case "list":
		switch {
		case len(pos) != 1:
			return usageErr("dlq", "dlq list takes no arguments")
		case set["to"] || set["batch"]:
			return usageErr("dlq", "--to and --batch are flags of dlq redrive")
		case *cause != "" && *cause != client.CauseNack && *cause != client.CauseLeaseExpired:
			return usageErr("dlq", "--cause must be %s or %s", client.CauseNack, client.CauseLeaseExpired)
		case *limit < 0:
			return usageErr("dlq", "--limit must not be negative")
		}
		c, err := o.client()
		if err != nil {
			return err
		}
		return dlqList(ctx, c, o, client.DeadLetteredOptions{SourceQueue: *source, Cause: *cause}, *limit)
	case "redrive":
		switch {
		case len(pos) != 2:
			return usageErr("dlq", "dlq redrive needs one queue name (the dead-letter queue)")
		case set["source"] || set["cause"] || set["limit"]:
			return usageErr("dlq", "--source, --cause and --limit are flags of dlq list")
		case *batch < 1 || *batch > maxRedriveBatch:
			return usageErr("dlq", "--batch must be between 1 and %d", maxRedriveBatch)
		}
		c, err := o.client()
		if err != nil {
			return err
		}
		return dlqRedrive(ctx, c, o, pos[1], *to, *batch)
	default:
		return usageErr("dlq", "unknown verb dlq %s", verb)
	}
}

func dlqList(ctx context.Context, c *client.Client, o *cliOptions, filter client.DeadLetteredOptions, limit int) error {
	var msgs []client.StoredMessage
	more := false
	for m, err := range c.DeadLetteredBy(ctx, filter) {
		if err != nil {
			return apiError(err)
		}
		if limit > 0 && len(msgs) == limit {
			more = true
			break
		}
		msgs = append(msgs, m)
	}
	if more {
		fmt.Fprintf(os.Stderr, "showing the newest %d dead-lettered messages; --limit 0 shows all\n", limit)
	}
	if o.json {
		list := make([]messageJSON, len(msgs))
		for i, m := range msgs {
			list[i] = m.Wire()
		}
		return writeJSON(os.Stdout, map[string]any{"messages": list})
	}
	if len(msgs) == 0 {
		fmt.Fprintln(os.Stderr, "no dead-lettered messages")
		return nil
	}
	tw := newTable(os.Stdout)
	fmt.Fprintln(tw, "DEAD-LETTERED\tQUEUE\tFROM\tWHY\tSEQUENCE\tMESSAGE-ID\tGROUP\tTAGS\tBODY")
	for _, m := range msgs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", humanTime(m.DeadLetteredAt), m.Queue,
			orDash(m.ReRoutedFrom), why(m.DeadLetter), m.Sequence, m.MessageID, orDash(m.GroupID), tagsPreview(m.Tags),
			bodyPreview(m.Body, m.Binary))
	}
	return tw.Flush()
}

// why is a dead letter's cause for a table: "nack ×3: the reason…" or
// "lease_expired ×5"; "-" when it was not recorded.
func why(d *client.DeadLetter) string {
	if d == nil {
		return "-"
	}
	s := fmt.Sprintf("%s ×%d", d.Cause, d.ReceiveCount)
	if d.Reason != nil {
		s += ": " + bodyPreview([]byte(*d.Reason), false)
	}
	return s
}

// dlqRedrive moves every dead-lettered message of queue, batch by batch,
// while the server reports some remaining: with a progress bar on a
// terminal, with a line per batch otherwise (both on stderr).
func dlqRedrive(ctx context.Context, c *client.Client, o *cliOptions, queue, to string, batch int) error {
	progress := newRedriveProgress(os.Stderr, queue)
	var moved int64
	idle := 0
	for {
		n, remaining, err := c.RedriveQueue(ctx, queue, to, batch)
		if err != nil {
			progress.done()
			if moved > 0 {
				fmt.Fprintf(os.Stderr, "moved %d %s before the error\n", moved, plural(moved, "message"))
			}
			return apiError(err)
		}
		moved += n
		progress.update(moved, remaining)
		if remaining == 0 {
			break
		}
		// Messages that another redrive holds are skipped (SKIP LOCKED):
		// nothing moved while some remain means waiting for it to finish.
		if n == 0 {
			idle++
			select {
			case <-ctx.Done():
				progress.done()
				return apiError(ctx.Err())
			case <-time.After(min(time.Duration(idle)*100*time.Millisecond, time.Second)):
			}
		} else {
			idle = 0
		}
	}
	progress.done()
	if o.json {
		out := map[string]any{"queue": queue, "toQueue": nil, "moved": moved}
		if to != "" {
			out["toQueue"] = to
		}
		return writeJSON(os.Stdout, out)
	}
	dest := "their source queues"
	if to != "" {
		dest = to
	}
	fmt.Printf("moved %d %s from %s to %s\n", moved, plural(moved, "message"), queue, dest)
	return nil
}

// redriveProgress shows a bulk redrive's progress: a bar on a terminal,
// plain lines elsewhere (logs, pipes, tests).
type redriveProgress struct {
	w        io.Writer
	queue    string
	terminal bool
	bar      *progressbar.ProgressBar // on a terminal, from the first update on
}

func newRedriveProgress(w *os.File, queue string) *redriveProgress {
	return &redriveProgress{w: w, queue: queue, terminal: term.IsTerminal(int(w.Fd()))}
}

// update reports the messages moved so far and how many remain.
func (p *redriveProgress) update(moved, remaining int64) {
	total := moved + remaining
	switch {
	case !p.terminal:
		fmt.Fprintf(p.w, "redrive %s: moved %d of %d, %d remaining\n", p.queue, moved, total, remaining)
		return
	case p.bar == nil && total == 0:
		return
	case p.bar == nil:
		p.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription("redrive "+p.queue),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	default:
		p.bar.ChangeMax64(total) // more may have been dead-lettered meanwhile
	}
	_ = p.bar.Set64(moved)
}

func (p *redriveProgress) done() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
