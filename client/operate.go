package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"

	"github.com/skipq/skipq/wire"
)

// State is a message's state as browsing reports it.
type State = wire.State

// Message states; "" in a filter means every state.
const (
	StateAvailable = wire.StateAvailable
	StateDelayed   = wire.StateDelayed
	StateInFlight  = wire.StateInFlight
	// A retained message's state (browse, lookup and search).
	StateAcked = wire.StateAcked
	// A filter of SearchMessages only, never a message's state: the dead
	// letters not received from their dead-letter queue since, which are
	// StateAvailable (or StateDelayed) there.
	StateDeadLettered = wire.StateDeadLettered
)

// BrowsedMessage is a message with its state and when it became or becomes
// receivable (zero for an acked one: never again).
type BrowsedMessage struct {
	StoredMessage
	State     State
	VisibleAt wire.Time
	// AckedAt is when a retained message (StateAcked, the queue's
	// RetainAckedSeconds) was acked; nil for every other.
	AckedAt *wire.Time
}

func browsed(w wire.Message) (BrowsedMessage, error) {
	m, err := stored(w)
	return BrowsedMessage{StoredMessage: m, State: w.State, VisibleAt: deref(w.VisibleAt), AckedAt: w.AckedAt}, err
}

// browsedPage decodes a page of browsed (or found) messages.
func browsedPage(out wire.MessagePage) ([]BrowsedMessage, string, error) {
	msgs := make([]BrowsedMessage, len(out.Messages))
	for i, w := range out.Messages {
		var err error
		if msgs[i], err = browsed(w); err != nil {
			return nil, "", err
		}
	}
	return msgs, deref(out.NextCursor), nil
}

// BrowseOptions select a page of BrowseMessages.
type BrowseOptions struct {
	State  State  // "" = every state
	Limit  int    // 1 … 1000; 0 = the server's default (100)
	Cursor string // NextCursor of the previous page
}

// BrowseMessages returns one page of a queue's messages by sequence, without
// changing them; nextCursor is "" on the last page. Messages iterates over
// every page.
func (c *Client) BrowseMessages(ctx context.Context, queue string, opts BrowseOptions) (msgs []BrowsedMessage, nextCursor string, err error) {
	q := url.Values{}
	if opts.State != "" {
		q.Set("state", string(opts.State))
	}
	setPaging(q, opts.Limit, opts.Cursor)
	var out wire.MessagePage
	if _, err := c.do(ctx, call{method: http.MethodGet, path: queuePath(queue) + "/messages", query: q, out: &out, retry: retryIdempotent}); err != nil {
		return nil, "", err
	}
	return browsedPage(out)
}

// Messages iterates over a queue's messages in state ("" = all) by
// sequence, following nextCursor. An error is yielded once, last.
func (c *Client) Messages(ctx context.Context, queue string, state State) iter.Seq2[BrowsedMessage, error] {
	return paginate(func(cursor string) ([]BrowsedMessage, string, error) {
		return c.BrowseMessages(ctx, queue, BrowseOptions{State: state, Cursor: cursor})
	})
}

func messagePath(queue, messageID string) string {
	return queuePath(queue) + "/messages/" + seg(messageID)
}

// GetMessage returns one message of a queue with its state; not_found if
// there is none.
func (c *Client) GetMessage(ctx context.Context, queue, messageID string) (BrowsedMessage, error) {
	var w wire.Message
	if _, err := c.do(ctx, call{method: http.MethodGet, path: messagePath(queue, messageID), out: &w, retry: retryIdempotent}); err != nil {
		return BrowsedMessage{}, err
	}
	return browsed(w)
}

// HistoryEvent is one event of a traced message's life (docs/API.md#history): Type
// (an Event* constant), when, the queue and message id it happened to, the
// API key that caused it (nil for the worker's events, SQL API calls and
// with auth off), and the fields of its type.
type HistoryEvent = wire.HistoryEvent

// History event types (HistoryEvent.Type).
const (
	EventSent         = wire.EventSent
	EventReceived     = wire.EventReceived
	EventExtended     = wire.EventExtended
	EventNacked       = wire.EventNacked
	EventLeaseExpired = wire.EventLeaseExpired
	EventRequeued     = wire.EventRequeued
	EventDeadLettered = wire.EventDeadLettered
	EventRedriven     = wire.EventRedriven
	EventAcked        = wire.EventAcked
	EventExpired      = wire.EventExpired
	EventDeleted      = wire.EventDeleted
)

// History returns the events of a message's life, oldest first. Only
// messages sent while their queue's Trace setting was on have any: another
// existing message returns none and no error. A dead-lettered or redriven
// message's history starts with the events in its earlier queues. A gone
// message's history stays for 24 hours; after that, and for a message that
// never existed, the error is not_found.
func (c *Client) History(ctx context.Context, queue, messageID string) ([]HistoryEvent, error) {
	var out wire.History
	if _, err := c.do(ctx, call{method: http.MethodGet, path: messagePath(queue, messageID) + "/history", out: &out, retry: retryIdempotent}); err != nil {
		return nil, err
	}
	return out.Events, nil
}

// DeleteMessage removes one message (its receipt handles go stale);
// not_found if there is none. It is retried only on 429.
func (c *Client) DeleteMessage(ctx context.Context, queue, messageID string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: messagePath(queue, messageID), retry: retryRateLimited})
	return err
}

// DeadLetteredOptions select a page of ListDeadLettered.
type DeadLetteredOptions struct {
	SourceQueue string // only messages dead-lettered from this queue; "" = all
	Cause       string // only those that died of CauseNack or CauseLeaseExpired; "" = all
	Limit       int    // 1 … 1000; 0 = the server's default (100)
	Cursor      string
}

// ListDeadLettered returns one page of the caller's dead-lettered messages,
// newest DeadLetteredAt first; each one's Queue is where it sits now and
// ReRoutedFrom where it came from. DeadLettered iterates over every page.
func (c *Client) ListDeadLettered(ctx context.Context, opts DeadLetteredOptions) (msgs []StoredMessage, nextCursor string, err error) {
	q := url.Values{}
	if opts.SourceQueue != "" {
		q.Set("sourceQueue", opts.SourceQueue)
	}
	if opts.Cause != "" {
		q.Set("cause", opts.Cause)
	}
	setPaging(q, opts.Limit, opts.Cursor)
	var out wire.MessagePage
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/dlq", query: q, out: &out, retry: retryIdempotent}); err != nil {
		return nil, "", err
	}
	if msgs, err = storedAll(out.Messages); err != nil {
		return nil, "", err
	}
	return msgs, deref(out.NextCursor), nil
}

// DeadLettered iterates over the dead-lettered messages from sourceQueue
// ("" = from every queue), newest first. An error is yielded once, last.
func (c *Client) DeadLettered(ctx context.Context, sourceQueue string) iter.Seq2[StoredMessage, error] {
	return c.DeadLetteredBy(ctx, DeadLetteredOptions{SourceQueue: sourceQueue})
}

// DeadLetteredBy iterates over the dead-lettered messages that opts select
// (its Cursor is where to start, its Limit the page size), newest first.
func (c *Client) DeadLetteredBy(ctx context.Context, opts DeadLetteredOptions) iter.Seq2[StoredMessage, error] {
	return paginate(func(cursor string) ([]StoredMessage, string, error) {
		page := opts
		if cursor != "" {
			page.Cursor = cursor
		}
		return c.ListDeadLettered(ctx, page)
	})
}

// Redriven names the message a redrive created.
type Redriven = wire.Redriven

// Redrive moves one dead-lettered message of queue (where it sits now, e.g.
// the dead-letter queue) to toQueue ("" = the queue it came from) as a new
// message with a new id. A message that was not dead-lettered is a 409
// not_dead_lettered. It is retried only on 429 (a retry after a lost answer
// would report not_found).
func (c *Client) Redrive(ctx context.Context, queue, messageID, toQueue string) (Redriven, error) {
	in := wire.RedriveRequest{ToQueue: toQueue}
	var out wire.RedriveResult
	_, err := c.do(ctx, call{method: http.MethodPost, path: messagePath(queue, messageID) + "/redrive",
		body: in, out: &out, retry: retryRateLimited})
	return out.RedrivenAs, err
}

// RedriveQueue redrives up to max (1 … 10000; 0 = 10000) dead-lettered
// messages of queue to toQueue ("" = each one's source) and reports how
// many it moved and how many are left; call it again while remaining > 0.
// It is retried only on 429.
func (c *Client) RedriveQueue(ctx context.Context, queue, toQueue string, max int) (moved, remaining int64, err error) {
	in := wire.RedriveQueueRequest{ToQueue: toQueue, MaxMessages: maxMessages(max)}
	var out wire.RedriveQueueResult
	_, err = c.do(ctx, call{method: http.MethodPost, path: queuePath(queue) + "/redrive",
		body: in, out: &out, retry: retryRateLimited})
	return out.Moved, out.Remaining, err
}
