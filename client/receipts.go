package client

import (
	"context"
	"net/http"
	"time"

	"github.com/skipq/skipq/wire"
)

// Settle routes take a receipt handle (the single form: 200, or 404
// receipt_stale) or a list of them (always 200, with per-handle failures).
// They are retried like idempotent requests: see the package documentation
// for what a retried ack, nack or requeue reports when its first attempt
// succeeded.

// MaxHandles is the most receipt handles one settle request carries; the
// *All methods split longer lists into several requests.
const MaxHandles = 1024

// SettleResult is the outcome of a list-form settle.
type SettleResult = wire.SettleResult

// SettleFailure is one handle that settled nothing, with the error code
// ("receipt_stale") and message.
type SettleFailure = wire.SettleFailure

// settleBody is a receipt route's request body around its handles.
type settleBody func(wire.SettleRequest) any

func handlesOnly(r wire.SettleRequest) any { return r }

func withVisibility(d time.Duration) settleBody {
	return func(r wire.SettleRequest) any {
		return wire.VisibilityRequest{SettleRequest: r, VisibilitySeconds: seconds(d)}
	}
}

func withReason(reason string) settleBody {
	return func(r wire.SettleRequest) any { return wire.NackRequest{SettleRequest: r, Reason: &reason} }
}

func withQueue(queue string) settleBody {
	return func(r wire.SettleRequest) any { return wire.RequeueRequest{SettleRequest: r, Queue: &queue} }
}

func (c *Client) settleOne(ctx context.Context, route string, in any) (wire.VisibilityResult, error) {
	var out wire.VisibilityResult
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/receipts/" + route, body: in, out: &out, retry: retryIdempotent})
	return out, err
}

// settleAll sends handles in requests of at most MaxHandles and sums the
// results; on an error it returns what the requests before it settled.
func (c *Client) settleAll(ctx context.Context, route string, handles []string, body settleBody) (SettleResult, error) {
	res := SettleResult{Failed: []SettleFailure{}}
	for len(handles) > 0 {
		n := min(len(handles), MaxHandles)
		out, err := c.settleOne(ctx, route, body(wire.SettleRequest{ReceiptHandles: handles[:n]}))
		if err != nil {
			return res, err
		}
		res.Succeeded += out.Succeeded
		res.Failed = append(res.Failed, out.Failed...)
		handles = handles[n:]
	}
	return res, nil
}

// seconds converts a lease duration to the API's whole seconds, rounding
// up; d ≤ 0 is 0.
func seconds(d time.Duration) *int {
	s := 0
	if d > 0 {
		s = int((d + time.Second - 1) / time.Second)
	}
	return &s
}

// Ack removes the message of a receipt handle.
func (c *Client) Ack(ctx context.Context, handle string) error {
	_, err := c.settleOne(ctx, "ack", wire.SettleRequest{ReceiptHandle: &handle})
	return err
}

// Nack makes the message of a receipt handle available again now (or
// dead-letters it on its last allowed delivery).
func (c *Client) Nack(ctx context.Context, handle string) error {
	_, err := c.settleOne(ctx, "nack", wire.SettleRequest{ReceiptHandle: &handle})
	return err
}

// NackWithReason nacks like Nack and records why (at most MaxReasonBytes):
// the message's LastFailure, and its DeadLetter if this nack dead-letters
// it.
func (c *Client) NackWithReason(ctx context.Context, handle, reason string) error {
	_, err := c.settleOne(ctx, "nack", withReason(reason)(wire.SettleRequest{ReceiptHandle: &handle}))
	return err
}

// MaxReasonBytes bounds a nack's reason (UTF-8 bytes).
const MaxReasonBytes = 1024

// ExtendVisibility makes the lease of a receipt handle end d from now
// (whole seconds, rounded up; 0 releases it) and returns the new end.
func (c *Client) ExtendVisibility(ctx context.Context, handle string, d time.Duration) (time.Time, error) {
	out, err := c.settleOne(ctx, "visibility", withVisibility(d)(wire.SettleRequest{ReceiptHandle: &handle}))
	if out.VisibleUntil == nil {
		return time.Time{}, err
	}
	return out.VisibleUntil.Time, err
}

// Requeue moves the message of a receipt handle to queue as available, with
// a fresh delivery state.
func (c *Client) Requeue(ctx context.Context, handle, queue string) error {
	_, err := c.settleOne(ctx, "requeue", withQueue(queue)(wire.SettleRequest{ReceiptHandle: &handle}))
	return err
}

// AckAll acks many handles; the ones that settled nothing are in Failed.
func (c *Client) AckAll(ctx context.Context, handles []string) (SettleResult, error) {
	return c.settleAll(ctx, "ack", handles, handlesOnly)
}

// NackAll nacks many handles.
func (c *Client) NackAll(ctx context.Context, handles []string) (SettleResult, error) {
	return c.settleAll(ctx, "nack", handles, handlesOnly)
}

// NackAllWithReason nacks many handles for one reason.
func (c *Client) NackAllWithReason(ctx context.Context, handles []string, reason string) (SettleResult, error) {
	return c.settleAll(ctx, "nack", handles, withReason(reason))
}

// ExtendVisibilityAll sets the lease of many handles to end d from now (0
// releases them).
func (c *Client) ExtendVisibilityAll(ctx context.Context, handles []string, d time.Duration) (SettleResult, error) {
	return c.settleAll(ctx, "visibility", handles, withVisibility(d))
}

// RequeueAll moves the messages of many handles to queue.
func (c *Client) RequeueAll(ctx context.Context, handles []string, queue string) (SettleResult, error) {
	return c.settleAll(ctx, "requeue", handles, withQueue(queue))
}
