package client

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"time"

	"github.com/skipq/skipq/wire"
)

// TopicSettings are a topic's settings for PutTopic; a nil field is not
// sent (the default on create, the current value on update). FIFO is fixed
// at creation.
type TopicSettings = wire.TopicSettings

// Topic is a topic with its subscriptions and counters (GetTopic, PutTopic,
// Subscribe).
type Topic = wire.Topic

// TopicSummary is a topic of a listing: its subscription count.
type TopicSummary = wire.TopicSummary

// TopicFilter selects the messages a subscription gets: for every tag key
// named, the message's tag is one of the listed values.
type TopicFilter = wire.TopicFilter

// PublishResult is one published message: how many groups got it.
type PublishResult = wire.PublishResult

// GroupState is a published message's state in one consumer group.
type GroupState = wire.GroupState

func topicPath(name string) string { return "/v1/topics/" + seg(name) }

// PutTopic creates the topic (created = true) or updates its settings.
func (c *Client) PutTopic(ctx context.Context, name string, s TopicSettings) (t Topic, created bool, err error) {
	status, err := c.do(ctx, call{method: http.MethodPut, path: topicPath(name), body: s, out: &t, retry: retryIdempotent})
	return t, status == http.StatusCreated, err
}

// GetTopic returns the topic with its subscriptions and counters.
func (c *Client) GetTopic(ctx context.Context, name string) (Topic, error) {
	var t Topic
	_, err := c.do(ctx, call{method: http.MethodGet, path: topicPath(name), out: &t, retry: retryIdempotent})
	return t, err
}

// ListTopics returns one page of the caller's topics by name; nextCursor is
// "" on the last page. Topics iterates over every page.
func (c *Client) ListTopics(ctx context.Context, limit int, cursor string) (topics []TopicSummary, nextCursor string, err error) {
	q := url.Values{}
	setPaging(q, limit, cursor)
	var out wire.TopicPage
	_, err = c.do(ctx, call{method: http.MethodGet, path: "/v1/topics", query: q, out: &out, retry: retryIdempotent})
	if err != nil {
		return nil, "", err
	}
	return out.Topics, deref(out.NextCursor), nil
}

// Topics iterates over every topic, following nextCursor. An error is
// yielded once, as the last pair.
func (c *Client) Topics(ctx context.Context) iter.Seq2[TopicSummary, error] {
	return paginate(func(cursor string) ([]TopicSummary, string, error) {
		return c.ListTopics(ctx, 0, cursor)
	})
}

// DeleteTopic drops the topic and its subscriptions; the queues and their
// messages stay. It is retried only on 429.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: topicPath(name), retry: retryRateLimited})
	return err
}

// Subscribe subscribes queue (created if missing) to the topic from now on,
// with an optional filter, or changes its filter; created says which.
func (c *Client) Subscribe(ctx context.Context, topic, queue string, filter *TopicFilter) (t Topic, created bool, err error) {
	status, err := c.do(ctx, call{method: http.MethodPut, path: topicPath(topic) + "/subscriptions/" + seg(queue),
		body: wire.SubscribeRequest{Filter: filter}, out: &t, retry: retryIdempotent})
	return t, status == http.StatusCreated, err
}

// SubscribeReplay subscribes queue (created if missing) to a topic that
// retains its messages, replaying first: the queue receives, in publish
// order, every retained message published since from that matches the
// filter, then everything published after. On an existing subscription it
// changes only the filter, as Subscribe does.
func (c *Client) SubscribeReplay(ctx context.Context, topic, queue string, filter *TopicFilter, from time.Time) (t Topic, created bool, err error) {
	at := wire.At(from)
	status, err := c.do(ctx, call{method: http.MethodPut, path: topicPath(topic) + "/subscriptions/" + seg(queue),
		body: wire.SubscribeRequest{Filter: filter, ReplayFrom: &at}, out: &t, retry: retryIdempotent})
	return t, status == http.StatusCreated, err
}

// Unsubscribe ends the queue's subscription; the queue and its messages
// stay. It is retried only on 429.
func (c *Client) Unsubscribe(ctx context.Context, topic, queue string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: topicPath(topic) + "/subscriptions/" + seg(queue),
		retry: retryRateLimited})
	return err
}

// Publish delivers one message to every subscribed queue whose filter
// matches, atomically. A publish to a missing topic is not_found. It is
// retried after a connection error or a 503 only with a MessageID.
func (c *Client) Publish(ctx context.Context, topic string, m Message) (PublishResult, error) {
	var out PublishResult
	retry := retryRateLimited
	if m.MessageID != "" {
		retry = retryIdempotent
	}
	_, err := c.do(ctx, call{method: http.MethodPost, path: topicPath(topic) + "/messages",
		body: wire.PublishRequest{SendRequest: m.wire()}, out: &out, retry: retry})
	return out, err
}

// PublishBatch publishes up to MaxBatch messages in one transaction: every
// group gets all that match, or nothing is published. It is retried as
// SendBatch is.
func (c *Client) PublishBatch(ctx context.Context, topic string, msgs []Message) ([]PublishResult, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	if len(msgs) > MaxBatch {
		return nil, fmt.Errorf("skipq: PublishBatch: %d messages, at most %d per batch", len(msgs), MaxBatch)
	}
	in := wire.PublishRequest{Messages: make([]wire.SendRequest, len(msgs))}
	retry := retryIdempotent
	for i, m := range msgs {
		in.Messages[i] = m.wire()
		if m.MessageID == "" {
			retry = retryRateLimited
		}
	}
	var out wire.PublishBatchResult
	_, err := c.do(ctx, call{method: http.MethodPost, path: topicPath(topic) + "/messages", body: in, out: &out,
		retry: retry})
	return out.Results, err
}

// TopicMessage returns a published message's state in each of the topic's
// groups.
func (c *Client) TopicMessage(ctx context.Context, topic, messageID string) ([]GroupState, error) {
	var out wire.TopicMessage
	_, err := c.do(ctx, call{method: http.MethodGet, path: topicPath(topic) + "/messages/" + seg(messageID), out: &out,
		retry: retryIdempotent})
	return out.ConsumerGroups, err
}
