package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	"github.com/skipq/skipq/wire"
)

// QueueSettings are a queue's defaults for PutQueue. A nil field is not
// sent: on create it takes the server default, on update it keeps the
// queue's current value.
type QueueSettings = wire.QueueSettings

// Queue is a queue with its settings; Stats is set by GetQueue.
type Queue = wire.Queue

// QueueStats are a queue's message counts at request time.
type QueueStats = wire.QueueStats

func queuePath(name string) string { return "/v1/queues/" + seg(name) }

// PutQueue creates the queue (created = true) or updates the given settings
// of an existing one. It is retried like every idempotent request.
func (c *Client) PutQueue(ctx context.Context, name string, s QueueSettings) (q Queue, created bool, err error) {
	status, err := c.do(ctx, call{method: http.MethodPut, path: queuePath(name), body: s, out: &q, retry: retryIdempotent})
	// A retried create whose first attempt succeeded answers 200: created
	// is then false although this call created the queue.
	return q, status == http.StatusCreated, err
}

// GetQueue returns the queue with its Stats.
func (c *Client) GetQueue(ctx context.Context, name string) (Queue, error) {
	var q Queue
	_, err := c.do(ctx, call{method: http.MethodGet, path: queuePath(name), out: &q, retry: retryIdempotent})
	return q, err
}

// ListQueuesOptions select a page of ListQueues.
type ListQueuesOptions struct {
	Prefix string // only queues whose name starts with it
	Limit  int    // 1 … 1000; 0 = the server's default (100)
	Cursor string // NextCursor of the previous page; "" = the first page
}

// ListQueues returns one page of the caller's queues by name; nextCursor is
// "" on the last page. Queues iterates over every page.
func (c *Client) ListQueues(ctx context.Context, opts ListQueuesOptions) (queues []Queue, nextCursor string, err error) {
	q := url.Values{}
	if opts.Prefix != "" {
		q.Set("prefix", opts.Prefix)
	}
	setPaging(q, opts.Limit, opts.Cursor)
	var out wire.QueuePage
	_, err = c.do(ctx, call{method: http.MethodGet, path: "/v1/queues", query: q, out: &out, retry: retryIdempotent})
	if err != nil {
		return nil, "", err
	}
	return out.Queues, deref(out.NextCursor), nil
}

// Queues iterates over every queue whose name starts with prefix, following
// nextCursor. An error is yielded once, as the last pair.
func (c *Client) Queues(ctx context.Context, prefix string) iter.Seq2[Queue, error] {
	return paginate(func(cursor string) ([]Queue, string, error) {
		return c.ListQueues(ctx, ListQueuesOptions{Prefix: prefix, Cursor: cursor})
	})
}

// DeleteQueue removes the queue and every message in it. It is retried only
// on 429 (a retry after a lost answer would report not_found).
func (c *Client) DeleteQueue(ctx context.Context, name string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: queuePath(name), retry: retryRateLimited})
	return err
}

// PurgeQueue removes every message of the queue, in every state, and
// returns how many; the queue and its idempotency keys stay. It is retried
// only on 429 (a repeated purge would also remove what arrived since).
func (c *Client) PurgeQueue(ctx context.Context, name string) (int64, error) {
	var out wire.PurgeResult
	_, err := c.do(ctx, call{method: http.MethodPost, path: queuePath(name) + "/purge", out: &out, retry: retryRateLimited})
	return out.Purged, err
}

func setPaging(q url.Values, limit int, cursor string) {
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// paginate turns a page fetcher into an iterator over every item.
func paginate[T any](fetch func(cursor string) ([]T, string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		cursor := ""
		for {
			items, next, err := fetch(cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if next == "" || next == cursor {
				return
			}
			cursor = next
		}
	}
}
