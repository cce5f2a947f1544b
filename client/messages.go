package client

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/skipq/skipq/wire"
)

// Message is a message to send. At least one of Body and Metadata must be
// non-empty. A nil policy field takes the queue's default; an explicit
// value overrides it (DelaySeconds 0 = no delay, ExpirationSeconds 0 =
// never expires, DeadLetterQueue "" = discard), except MaxReceiveCount 0,
// which means the queue's default.
type Message struct {
	Body []byte
	// Binary sends the body base64-encoded and stores it as bytes;
	// receivers get it back with Binary set. A body that is not valid
	// UTF-8 is always sent this way.
	Binary   bool
	Metadata string
	Tags     map[string]string // ≤ 32; keys ^[A-Za-z0-9_.-]{1,64}$, not starting with "skipq."
	ClientID string
	// MessageID is the idempotency key (^[A-Za-z0-9._:-]{1,128}$): a
	// resend with the same id and content within the queue's dedup window
	// creates nothing and answers the first result with Duplicate set.
	// Without it the server assigns a UUIDv7 — and the client does not
	// retry the send after a connection error or a 503 (see the package
	// documentation).
	MessageID         string
	DelaySeconds      *int
	ExpirationSeconds *int
	MaxReceiveCount   *int
	DeadLetterQueue   *string
	// GroupID is the message's group: required on a FIFO queue (a group's
	// messages are delivered in order, one batch at a time), refused on a
	// standard one. A send with a group creates a missing queue as FIFO.
	GroupID string
}

func (m Message) wire() wire.SendRequest {
	w := wire.SendRequest{
		Metadata: m.Metadata, Tags: m.Tags, ClientID: m.ClientID, MessageID: m.MessageID,
		DelaySeconds: m.DelaySeconds, ExpirationSeconds: m.ExpirationSeconds,
		MaxReceiveCount: m.MaxReceiveCount, DeadLetterQueue: m.DeadLetterQueue, GroupID: m.GroupID,
	}
	if m.Binary || !utf8.Valid(m.Body) {
		w.Body, w.BodyEncoding = base64.StdEncoding.EncodeToString(m.Body), wire.EncodingBase64
	} else {
		w.Body = string(m.Body)
	}
	return w
}

// SendResult is what a send created (or, with Duplicate, what the first
// send with the same MessageID created).
type SendResult = wire.SendResult

// Send sends one message; the queue is created if it does not exist.
func (c *Client) Send(ctx context.Context, queue string, m Message) (SendResult, error) {
	var out SendResult
	retry := retryRateLimited
	if m.MessageID != "" {
		retry = retryIdempotent
	}
	_, err := c.do(ctx, call{method: http.MethodPost, path: queuePath(queue) + "/messages",
		body: m.wire(), out: &out, retry: retry})
	return out, err
}

// MaxBatch is the most messages SendBatch sends in one request.
const MaxBatch = 1000

// SendBatch sends up to MaxBatch messages in one transaction: all or none.
// The results are in the order of msgs. It is retried after a connection
// error or a 503 only when every message has a MessageID.
func (c *Client) SendBatch(ctx context.Context, queue string, msgs []Message) ([]SendResult, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	var out wire.SendBatchResult
	cl, err := batchCall("SendBatch", queue, msgs, &out)
	if err != nil {
		return nil, err
	}
	_, err = c.do(ctx, cl)
	return out.Results, err
}

// batchCall is the request of a batch send: retried after a connection
// error or a 503 only when every message has a MessageID.
func batchCall(op, queue string, msgs []Message, out any) (call, error) {
	if len(msgs) > MaxBatch {
		return call{}, fmt.Errorf("skipq: %s: %d messages, at most %d per batch", op, len(msgs), MaxBatch)
	}
	in := wire.SendBatchRequest{Messages: make([]wire.SendRequest, len(msgs))}
	if op == "SendEach" {
		in.Atomic = new(false)
	}
	retry := retryIdempotent
	for i, m := range msgs {
		in.Messages[i] = m.wire()
		if m.MessageID == "" {
			retry = retryRateLimited
		}
	}
	return call{method: http.MethodPost, path: queuePath(queue) + "/messages/batch", body: in, out: out, retry: retry}, nil
}

// BatchEntry is one message's outcome in SendEach: Result when it was
// stored (or was a duplicate), else Err, whose Status is 0 (the request
// itself succeeded) and whose issue paths are relative to the message
// ("delaySeconds").
type BatchEntry struct {
	Result *SendResult
	Err    *Error
}

// SendEach sends up to MaxBatch messages message by message ("atomic":
// false): every valid one is stored, in one transaction, and each that is
// not answers its own error. The entries are in the order of msgs. Only a
// problem of the request as a whole (too many messages, the queue name, a
// 503) is an error. It is retried as SendBatch is.
func (c *Client) SendEach(ctx context.Context, queue string, msgs []Message) ([]BatchEntry, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	var out wire.SendEachResult
	cl, err := batchCall("SendEach", queue, msgs, &out)
	if err != nil {
		return nil, err
	}
	if _, err := c.do(ctx, cl); err != nil {
		return nil, err
	}
	if len(out.Results) != len(msgs) {
		return nil, fmt.Errorf("skipq: SendEach: %d results for %d messages", len(out.Results), len(msgs))
	}
	entries := make([]BatchEntry, len(out.Results))
	for i, r := range out.Results {
		if r.Error != nil {
			entries[i].Err = &Error{Code: r.Error.Code, Message: r.Error.Message, Issues: r.Error.Issues}
		} else {
			entries[i].Result = r.SendResult
		}
	}
	return entries, nil
}

// StoredMessage is a message as the service holds it: what a receive, peek,
// browse or dead-letter listing returns.
type StoredMessage struct {
	MessageID       string
	Queue           string // where it is now
	Sequence        int64
	ClientID        string
	Metadata        string
	Body            []byte // decoded: the bytes that were sent
	Binary          bool   // the body was sent as base64 or SQL bytea
	Tags            map[string]string
	SentAt          wire.Time
	FirstReceivedAt *wire.Time
	ReceiveCount    int
	VisibleUntil    *wire.Time // end of the lease (received messages)
	DelayedTo       *wire.Time
	ExpiresAt       *wire.Time
	ReRoutedFrom    string // the queue it was moved from ("" = none)
	DeadLetteredAt  *wire.Time
	GroupID         string      // its group on a FIFO queue ("" on a standard one)
	LastFailure     *Failure    // its latest failed delivery; nil while none failed
	DeadLetter      *DeadLetter // why it was dead-lettered; nil on other messages
}

// Failure is a failed delivery: Cause CauseNack (Reason is the nack's) or
// CauseLeaseExpired, when, and the receive count reached.
type Failure = wire.Failure

// DeadLetter is why a message was dead-lettered: how its last delivery in
// SourceQueue failed, and the receive count it had reached there.
type DeadLetter = wire.DeadLetter

// Failure causes.
const (
	CauseNack         = wire.CauseNack
	CauseLeaseExpired = wire.CauseLeaseExpired
)

func stored(w wire.Message) (StoredMessage, error) {
	m := StoredMessage{
		MessageID: w.MessageID, Queue: w.Queue, Sequence: w.Sequence, ClientID: w.ClientID,
		Metadata: w.Metadata, Tags: w.Tags, SentAt: w.SentAt, FirstReceivedAt: w.FirstReceivedAt,
		ReceiveCount: w.ReceiveCount, VisibleUntil: w.VisibleUntil, DelayedTo: w.DelayedTo,
		ExpiresAt: w.ExpiresAt, ReRoutedFrom: deref(w.ReRoutedFrom), DeadLetteredAt: w.DeadLetteredAt,
		GroupID: deref(w.GroupID), LastFailure: w.LastFailure, DeadLetter: w.DeadLetter,
	}
	if m.Tags == nil {
		m.Tags = map[string]string{}
	}
	switch w.BodyEncoding {
	case wire.EncodingBase64:
		b, err := base64.StdEncoding.DecodeString(w.Body)
		if err != nil {
			return m, fmt.Errorf("skipq: message %s: base64 body: %w", w.MessageID, err)
		}
		m.Body, m.Binary = b, true
	default:
		m.Body = []byte(w.Body)
	}
	return m, nil
}

// Wire is m in the API's shape (the message object of docs/API.md): the body as
// sent, text or base64. The CLI prints it with --json.
func (m StoredMessage) Wire() wire.Message {
	w := wire.Message{
		MessageID: m.MessageID, Queue: m.Queue, Sequence: m.Sequence, ClientID: m.ClientID,
		Metadata: m.Metadata, Tags: m.Tags, SentAt: m.SentAt, FirstReceivedAt: m.FirstReceivedAt,
		ReceiveCount: m.ReceiveCount, VisibleUntil: m.VisibleUntil, DelayedTo: m.DelayedTo,
		ExpiresAt: m.ExpiresAt, DeadLetteredAt: m.DeadLetteredAt,
		LastFailure: m.LastFailure, DeadLetter: m.DeadLetter,
	}
	if w.Tags == nil {
		w.Tags = map[string]string{}
	}
	if m.Binary {
		w.Body, w.BodyEncoding = base64.StdEncoding.EncodeToString(m.Body), wire.EncodingBase64
	} else {
		w.Body, w.BodyEncoding = string(m.Body), wire.EncodingText
	}
	if m.ReRoutedFrom != "" {
		w.ReRoutedFrom = &m.ReRoutedFrom
	}
	if m.GroupID != "" {
		w.GroupID = &m.GroupID
	}
	return w
}

// ReceiveOptions tune Receive. Zero values take the defaults.
type ReceiveOptions struct {
	MaxMessages       int  // 1 … 1024; 0 = 1
	VisibilitySeconds *int // lease; nil = the queue's visibilitySeconds
	WaitSeconds       *int // long-poll wait; nil = the queue's receiveWaitSeconds; 0 = answer at once
	// AutoAck removes what it returns: the messages come without a receipt
	// handle (at-most-once).
	AutoAck bool
	// MaxMessagesPerGroup (FIFO queues, 1 … 10; 0 = 1) is how many of a
	// group's first messages one receive takes. They come together, in
	// order, sharing one lease; settle them in order.
	MaxMessagesPerGroup int
}

// Receive claims up to MaxMessages available messages and hides them for
// the lease, waiting up to WaitSeconds for the first one; it returns as soon
// as it has at least one (possibly fewer than asked), or none when the wait
// ends. A receive on a queue that does not exist waits and returns nothing.
//
// Receive is retried on 429 and 503 only, never after a connection error:
// the server may already have claimed messages for the lost answer, and a
// retry would claim others while those stay hidden until their lease ends.
//
// Should a body fail to decode (which would be a server bug), Receive
// returns every claimed message together with the error, so that the
// caller can still settle them.
func (c *Client) Receive(ctx context.Context, queue string, opts ReceiveOptions) ([]*Received, error) {
	msgs, _, err := c.AckAndReceive(ctx, queue, nil, opts)
	return msgs, err
}

// AckAndReceive acks handles (at most MaxHandles) and receives as Receive
// does, in one request: the server acks them in the same transaction as
// the receive's first claim ("ack these, give me more"), so a consumer
// pays one request and one commit instead of two. The result says how each
// handle went, as AckAll's does (a stale handle is a failed entry, not an
// error). With no handles it is Receive.
//
// Retries are Receive's (429 and 503 only: the server did nothing). After
// any other error the ack may or may not have been done, and acking the
// handles again is safe: one already acked answers receipt_stale.
func (c *Client) AckAndReceive(ctx context.Context, queue string, handles []string, opts ReceiveOptions) ([]*Received, SettleResult, error) {
	in := wire.ReceiveRequest{MaxMessages: maxMessages(opts.MaxMessages),
		VisibilitySeconds: opts.VisibilitySeconds, WaitSeconds: opts.WaitSeconds, AutoAck: opts.AutoAck,
		MaxMessagesPerGroup: optional(opts.MaxMessagesPerGroup)}
	if len(handles) > 0 {
		in.Ack = handles
	}
	ws, acked, err := c.receive(ctx, queue, in)
	if err != nil {
		return nil, acked, err
	}
	out := make([]*Received, 0, len(ws))
	var decodeErr error
	for _, w := range ws {
		m, err := stored(w)
		if err != nil && decodeErr == nil {
			decodeErr = err
		}
		out = append(out, &Received{StoredMessage: m, ReceiptHandle: deref(w.ReceiptHandle), c: c})
	}
	return out, acked, decodeErr
}

// PeekOptions tune Peek.
type PeekOptions struct {
	MaxMessages int  // 1 … 1024; 0 = 1
	WaitSeconds *int // nil = the queue's receiveWaitSeconds; 0 = answer at once
}

// Peek returns available messages without changing them: no receipt handle,
// counts unchanged. Like a receive it waits when nothing is available.
func (c *Client) Peek(ctx context.Context, queue string, opts PeekOptions) ([]StoredMessage, error) {
	ws, _, err := c.receive(ctx, queue, wire.ReceiveRequest{MaxMessages: maxMessages(opts.MaxMessages), WaitSeconds: opts.WaitSeconds, IsPeek: true})
	if err != nil {
		return nil, err
	}
	return storedAll(ws)
}

// receive sends one receive request; the ack's result is empty (not nil)
// when it gave no handles.
func (c *Client) receive(ctx context.Context, queue string, in wire.ReceiveRequest) ([]wire.Message, SettleResult, error) {
	var out wire.ReceiveResult
	_, err := c.do(ctx, call{method: http.MethodPost, path: queuePath(queue) + "/messages/receive",
		body: in, out: &out, retry: retryNoConnErrors})
	acked := SettleResult{Failed: []SettleFailure{}}
	if out.Acked != nil {
		acked = *out.Acked
	}
	return out.Messages, acked, err
}

// maxMessages is a receive's maxMessages on the wire: 0 is not sent (the
// server's default, 1).
func maxMessages(n int) *int { return optional(n) }

// optional is a count on the wire: 0 is not sent (the server's default).
func optional(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

func storedAll(ws []wire.Message) ([]StoredMessage, error) {
	out := make([]StoredMessage, len(ws))
	for i, w := range ws {
		m, err := stored(w)
		if err != nil {
			return nil, err
		}
		out[i] = m
	}
	return out, nil
}

// Received is a received message with its receipt handle. Its settle
// methods (Ack, Nack, ExtendVisibility, Requeue) may be called from any
// goroutine; once one of Ack, Nack, Requeue or a release
// (ExtendVisibility(ctx, 0)) succeeded, the others return ErrSettled
// without a request, and once the server answered receipt_stale they
// return that error again without a request. Use it through its pointer;
// do not copy it.
type Received struct {
	StoredMessage
	ReceiptHandle string // "" when received with AutoAck

	c     *Client
	mu    sync.Mutex // serializes this message's settle requests
	state settleState
	stale error // the receipt_stale answer, when state is stateStale
}

type settleState int

const (
	stateOpen    settleState = iota
	stateSettled             // acked, nacked or requeued through this value
	stateStale               // the server answered receipt_stale
)

// settle runs one settle request of the message under its lock; final
// requests (ack, nack, requeue) close it when they succeed.
func (r *Received) settle(final bool, f func(handle string) error) error {
	if r.ReceiptHandle == "" {
		return ErrNoReceipt
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch r.state {
	case stateSettled:
		return ErrSettled
	case stateStale:
		return r.stale
	}
	err := f(r.ReceiptHandle)
	switch {
	case err == nil && final:
		r.state = stateSettled // never sent again, so never settled twice
	case IsReceiptStale(err):
		r.state, r.stale = stateStale, err
	}
	return err
}

// done reports whether the message can no longer be settled through r.
func (r *Received) done() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state != stateOpen
}

// Ack removes the message.
func (r *Received) Ack(ctx context.Context) error {
	return r.settle(true, func(h string) error { return r.c.Ack(ctx, h) })
}

// Nack makes the message available again now; on its last allowed delivery
// it is dead-lettered (or discarded) instead.
func (r *Received) Nack(ctx context.Context) error {
	return r.settle(true, func(h string) error { return r.c.Nack(ctx, h) })
}

// NackWithReason nacks like Nack and records why (Client.NackWithReason).
func (r *Received) NackWithReason(ctx context.Context, reason string) error {
	return r.settle(true, func(h string) error { return r.c.NackWithReason(ctx, h, reason) })
}

// ExtendVisibility makes the lease end d from now (rounded up to whole
// seconds) and returns the new end of the lease. d ≤ 0 releases the
// message at once (others may receive it now) and counts as settling it:
// later settles through r return ErrSettled. (On the server the handle of a
// released message stays valid until the next delivery; the client does
// not use it any more, so that a release is never followed by an ack or a
// heartbeat that would hide the message again.)
func (r *Received) ExtendVisibility(ctx context.Context, d time.Duration) (visibleUntil time.Time, err error) {
	err = r.settle(d <= 0, func(h string) error {
		var err error
		visibleUntil, err = r.c.ExtendVisibility(ctx, h, d)
		return err
	})
	return visibleUntil, err
}

// Requeue moves the message to queue (created if missing) as available,
// with receiveCount 0 and ReRoutedFrom set to the queue it left.
func (r *Received) Requeue(ctx context.Context, queue string) error {
	return r.settle(true, func(h string) error { return r.c.Requeue(ctx, h, queue) })
}
