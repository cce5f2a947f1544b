package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/skipq/skipq/client"
)

const tailUsage = `skipq tail QUEUE [--new]
  Prints the queue's messages by sequence (with --new: only those sent from
  now on), then each new one as it arrives, until Ctrl-C. Nothing is received
  or changed.`

const (
	// tailPage is the page size of tail's browsing. Once caught up, tail
	// re-reads the last (partial) page on every look, so keep it small.
	tailPage = 100
	// tailWait is how long one look waits (a long-polling peek) for a new
	// available message before browsing anyway: new delayed messages, and
	// ones a consumer took at once, show within this.
	tailWait = 5
	// tailPoll paces the looks while the queue has available messages that
	// tail already printed (a peek then answers at once).
	tailPoll = 500 * time.Millisecond
)

// cmdTail: skipq tail QUEUE — peek-follow. It browses the queue by sequence
// (every state) and prints each message it has not printed yet; between
// looks it waits in a peek, which the service answers as soon as a message
// is available. Ctrl-C ends it with exit status 0.
func cmdTail(ctx context.Context, args []string) error {
	fs, o := cliFlags("tail")
	onlyNew := fs.Bool("new", false, "skip the messages already in the queue")
	pos, err := cliParse(fs, args, tailUsage)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr("tail", "tail needs one queue name")
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	t := &tailer{c: c, queue: pos[0], json: o.json, out: os.Stdout}
	err = t.run(ctx, *onlyNew, func() {
		fmt.Fprintf(os.Stderr, "following %s (Ctrl-C stops)\n", t.queue)
	})
	if ctx.Err() != nil {
		return nil // Ctrl-C or SIGTERM: the normal end
	}
	return apiError(err)
}

type tailer struct {
	c     *client.Client
	queue string
	json  bool
	out   io.Writer

	// cursor is the page to browse next: the one after the last full page
	// (browse cursors are opaque, so tail keeps the one that produced the
	// last page rather than making one after its last sequence).
	cursor string
	last   int64 // the highest sequence printed (or skipped with --new)
	seen   bool  // last is set
}

// run follows the queue until ctx is done or a request fails; following is
// called once, when tail has caught up with what is in the queue.
func (t *tailer) run(ctx context.Context, onlyNew bool, following func()) error {
	if err := t.catchUp(ctx, !onlyNew); err != nil {
		return err
	}
	following()
	for {
		if err := t.wait(ctx); err != nil {
			return err
		}
		if err := t.catchUp(ctx, true); err != nil {
			return err
		}
	}
}

// catchUp browses from the cursor to the end of the queue, printing (or,
// with print false, skipping) every message after the last one.
func (t *tailer) catchUp(ctx context.Context, print bool) error {
	for {
		msgs, next, err := t.c.BrowseMessages(ctx, t.queue, client.BrowseOptions{Limit: tailPage, Cursor: t.cursor})
		if client.IsNotFound(err) {
			return nil // not created yet (or deleted): wait for it
		}
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if t.seen && m.Sequence <= t.last {
				continue
			}
			if print {
				if err := t.print(m); err != nil {
					return err
				}
			}
			t.last, t.seen = m.Sequence, true
		}
		if next == "" {
			return nil
		}
		t.cursor = next
	}
}

// wait returns when there may be something new: a peek (a long poll) saw an
// available message after the last one, or its wait ended; when the queue
// has available messages that were printed already, after tailPoll.
func (t *tailer) wait(ctx context.Context) error {
	peeked, err := t.c.Peek(ctx, t.queue, client.PeekOptions{MaxMessages: 1, WaitSeconds: new(tailWait)})
	if err != nil {
		return err
	}
	if len(peeked) == 0 || !t.seen || peeked[0].Sequence > t.last {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(tailPoll):
		return nil
	}
}

func (t *tailer) print(m client.BrowsedMessage) error {
	if t.json {
		j := m.Wire()
		j.State = m.State
		if !m.VisibleAt.IsZero() {
			j.VisibleAt = &m.VisibleAt
		}
		return writeJSONLine(t.out, j)
	}
	_, err := fmt.Fprintf(t.out, "%s  %d  %s  %s  %s  %s\n", humanTime(&m.SentAt), m.Sequence, m.MessageID,
		m.State, tagsPreview(m.Tags), bodyPreview(m.Body, m.Binary))
	return err
}
