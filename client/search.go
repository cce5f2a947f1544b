package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"time"

	"github.com/skipq/skipq/wire"
)

// SearchOptions select a page of SearchMessages (GET /v1/messages); zero
// values filter nothing.
type SearchOptions struct {
	Queues      []string // exact names, at most 20; not with QueuePrefix
	QueuePrefix string
	States      []State   // StateAcked and the filter StateDeadLettered too
	SentAfter   time.Time // inclusive; zero = no bound
	SentBefore  time.Time // exclusive; zero = no bound
	Tags        map[string]string
	MessageID   string
	GroupID     string // exact: a FIFO group's messages
	Limit       int    // 1 … 1000; 0 = the server's default (100)
	Cursor      string // NextCursor of the previous page
}

// SearchMessages returns one page of the caller's messages across queues,
// newest SentAt first (ties by queue name, then sequence), each with its
// Queue and State. A page may hold fewer messages than Limit, even none,
// with a nextCursor: the server bounds what one request reads. nextCursor
// is "" after the last page; Search iterates over every page.
func (c *Client) SearchMessages(ctx context.Context, opts SearchOptions) (msgs []BrowsedMessage, nextCursor string, err error) {
	q := url.Values{}
	for _, name := range opts.Queues {
		q.Add("queue", name)
	}
	if opts.QueuePrefix != "" {
		q.Set("queuePrefix", opts.QueuePrefix)
	}
	for _, st := range opts.States {
		q.Add("state", string(st))
	}
	if !opts.SentAfter.IsZero() {
		q.Set("sentAfter", opts.SentAfter.UTC().Format(time.RFC3339Nano))
	}
	if !opts.SentBefore.IsZero() {
		q.Set("sentBefore", opts.SentBefore.UTC().Format(time.RFC3339Nano))
	}
	for k, v := range opts.Tags {
		q.Add("tag", k+":"+v)
	}
	if opts.MessageID != "" {
		q.Set("messageId", opts.MessageID)
	}
	if opts.GroupID != "" {
		q.Set("groupId", opts.GroupID)
	}
	setPaging(q, opts.Limit, opts.Cursor)
	var out wire.MessagePage
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/messages", query: q, out: &out, retry: retryIdempotent}); err != nil {
		return nil, "", err
	}
	return browsedPage(out)
}

// Search iterates over every message SearchMessages finds with opts
// (its Cursor is where to start), following nextCursor. An error is
// yielded once, last.
func (c *Client) Search(ctx context.Context, opts SearchOptions) iter.Seq2[BrowsedMessage, error] {
	return paginate(func(cursor string) ([]BrowsedMessage, string, error) {
		o := opts
		if cursor != "" {
			o.Cursor = cursor
		}
		return c.SearchMessages(ctx, o)
	})
}
