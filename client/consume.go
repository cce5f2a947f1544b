package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Handler processes one message. Returning nil acks it; returning an error
// (or panicking) nacks it, so that it is delivered again (or dead-lettered
// on its last allowed delivery). A handler may settle the message itself
// (m.Requeue, m.Nack, a release with m.ExtendVisibility(ctx, 0)); Consume
// then leaves it alone. While the handler runs, Consume extends the lease
// to ConsumeOptions.VisibilitySeconds every third of it, which overrides a
// longer extension the handler asked for.
type Handler func(ctx context.Context, m *Received) error

// ConsumeOptions tune Consume. Zero values take the defaults.
type ConsumeOptions struct {
	// Concurrency is how many handlers run at once (default 1).
	Concurrency int
	// MaxMessages is the most messages one receive asks for (default
	// Concurrency). A receive never asks for more than there are idle
	// handlers, so no message waits leased for a handler.
	MaxMessages int
	// WaitSeconds is the long-poll wait of each receive (default 20).
	WaitSeconds int
	// VisibilitySeconds is the lease of each received message (default
	// 30). While its handler runs, the lease is extended to this again
	// every third of it, so a handler may take longer than the lease.
	VisibilitySeconds int
	// ShutdownTimeout bounds how long Consume waits, once ctx is done, for
	// running handlers before it cancels their context (and then waits for
	// them to return). 0 waits without limit and never cancels handlers.
	ShutdownTimeout time.Duration
	// Logger receives handler failures, panics (with their stack), failed
	// settles and receive errors (default slog.Default()).
	Logger *slog.Logger
	// MaxMessagesPerGroup (FIFO queues, 1 … 10; default 1) is how many of
	// a group's messages one receive takes. They are handled one after
	// another, in order, by one handler slot each as its turn comes.
	MaxMessagesPerGroup int
}

// settleTimeout bounds one settle request of the consumer, retries included.
const settleTimeout = 30 * time.Second

// minReceiveBackoff keeps a consumer whose receives keep failing from
// spinning, whatever the retry settings.
const minReceiveBackoff = 100 * time.Millisecond

// Consume receives messages from queue and runs handler on each, with at
// most Concurrency handlers at once, until ctx is done:
//
//   - Each receive long-polls (WaitSeconds) for at most as many messages as
//     there are idle handlers; every received message goes to a handler at
//     once.
//   - A handler that returns nil acks its message; an error or a panic
//     (recovered and logged with its stack) nacks it. A message the handler
//     settled itself is not settled again. Every message is settled at
//     most once, after its handler returned. When the receive loop is
//     waiting for a free handler, which a finishing handler lets go, the
//     ack rides on that next receive (AckAndReceive: one request and one
//     commit for both); such a receive answers at once instead of
//     long-polling and is never abandoned, so its acks get their answer.
//   - While a handler runs, its message's lease is extended every third of
//     VisibilitySeconds. If the server answers receipt_stale (the lease was
//     lost, e.g. after a long network outage) the loss is logged and
//     nothing more is sent for that message; it will be delivered again.
//   - Handlers get a context that is not cancelled with ctx (it carries
//     ctx's values): a shutdown lets them finish.
//   - On a FIFO queue, the server never hands out a group's messages while
//     a batch of it is in flight, and the messages of one group that a
//     receive returns (MaxMessagesPerGroup) are handled one at a time, in
//     order, each settled before the next starts; when one fails, it and
//     the rest of its group's batch are nacked, so they come back in order.
//     No two messages of one group are ever handled at once.
//
// When ctx is done, Consume stops receiving (a long-poll in flight is
// abandoned), waits for running handlers (up to ShutdownTimeout, then
// cancels their context and waits for them to return), settles each as
// above, and returns nil. A message that arrived from a receive after ctx
// was done is not handled but released at once (visibility 0), so that
// other consumers get it without waiting for its lease.
//
// A receive abandoned at shutdown may, in a narrow window, have claimed
// messages on the server whose answer never arrived; they stay hidden until
// their lease (VisibilitySeconds) ends and are then delivered again: never
// lost, but late.
//
// Receive failures are logged and retried with backoff (after the client's
// own retries), except answers that no retry can fix (4xx other than 429:
// a bad queue name, a missing or weak API key): Consume then stops as on
// shutdown and returns that error.
func (c *Client) Consume(ctx context.Context, queue string, handler Handler, opts ConsumeOptions) error {
	if handler == nil {
		return errors.New("skipq: Consume: nil handler")
	}
	o := opts
	if o.Concurrency < 1 {
		o.Concurrency = 1
	}
	if o.MaxMessages < 1 || o.MaxMessages > o.Concurrency {
		o.MaxMessages = o.Concurrency
	}
	if o.WaitSeconds <= 0 {
		o.WaitSeconds = 20
	}
	if o.VisibilitySeconds <= 0 {
		o.VisibilitySeconds = 30
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("queue", queue)
	lease := time.Duration(o.VisibilitySeconds) * time.Second

	// Handlers and settles outlive ctx; handlers are cancelled only after
	// ShutdownTimeout.
	bg := context.WithoutCancel(ctx)
	handlerCtx, cancelHandlers := context.WithCancel(bg)
	defer cancelHandlers()

	slots := make(chan struct{}, o.Concurrency) // one per running handler
	var wg sync.WaitGroup
	var fatal error
	failures := 0
	acks := &pendingAcks{}
	defer acks.flush(bg, c, log) // acks left when receiving stopped

receiving:
	for {
		acks.between()
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			break receiving
		}
		if ctx.Err() != nil {
			<-slots
			break
		}
		n := 1
	more:
		for n < o.MaxMessages {
			select {
			case slots <- struct{}{}:
				n++
			default:
				break more
			}
		}
		handles := acks.take()
		rctx, wait, cancel := ctx, &o.WaitSeconds, context.CancelFunc(func() {})
		if len(handles) > 0 {
			// A receive that carries acks answers at once rather than
			// long-poll (an empty queue costs the next, ackless receive),
			// and a stop does not cut it off: its acks get their answer.
			rctx, cancel = context.WithTimeout(bg, settleTimeout)
			wait = new(0)
		}
		msgs, acked, err := c.AckAndReceive(rctx, queue, handles, ReceiveOptions{MaxMessages: n,
			VisibilitySeconds: &o.VisibilitySeconds, WaitSeconds: wait,
			MaxMessagesPerGroup: o.MaxMessagesPerGroup})
		cancel()
		if len(handles) > 0 {
			ackedWith(bg, c, handles, acked, err, log)
		}
		for range n - len(msgs) {
			<-slots
		}
		if ctx.Err() != nil {
			c.release(bg, msgs, log)
			for range msgs {
				<-slots
			}
			break
		}
		if err != nil && len(msgs) > 0 {
			// The answer arrived but a body did not decode: hand nothing
			// over, give the messages back.
			log.Error("skipq: undecodable message; nacking the batch", "err", err)
			c.nackAll(bg, msgs, log)
			for range msgs {
				<-slots
			}
			continue
		}
		if err != nil {
			if e, ok := asError(err); ok && e.Status >= 400 && e.Status < 500 && e.Status != http.StatusTooManyRequests {
				fatal = fmt.Errorf("skipq: Consume %s: %w", queue, err)
				break
			}
			failures++
			wait := max(c.backoff(failures, err), minReceiveBackoff)
			log.Warn("skipq: receive failed; retrying", "err", err, "wait", wait)
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			continue
		}
		failures = 0
		for _, run := range groupRuns(msgs) {
			wg.Go(func() {
				c.processRun(handlerCtx, bg, run, handler, lease, log, acks, func() { <-slots })
			})
		}
	}
	acks.stop()

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if o.ShutdownTimeout > 0 {
		t := time.NewTimer(o.ShutdownTimeout)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			log.Warn("skipq: shutdown timeout: cancelling running handlers", "timeout", o.ShutdownTimeout)
			cancelHandlers()
			<-done
		}
	} else {
		<-done
	}
	return fatal
}

// groupRuns splits a receive's messages into what must be handled in order:
// the consecutive messages of one FIFO group (a receive returns them group
// by group), or a single message.
func groupRuns(msgs []*Received) [][]*Received {
	var runs [][]*Received
	for i, m := range msgs {
		if i > 0 && m.GroupID != "" && m.GroupID == msgs[i-1].GroupID {
			runs[len(runs)-1] = append(runs[len(runs)-1], m)
			continue
		}
		runs = append(runs, []*Received{m})
	}
	return runs
}

// processRun handles a run's messages one after another, calling done as
// each is settled. The messages waiting their turn keep their lease. After
// a message whose handler failed, the rest of the run is nacked unhandled:
// handling them would put them before it.
func (c *Client) processRun(handlerCtx, bg context.Context, run []*Received, handler Handler, lease time.Duration, log *slog.Logger, acks *pendingAcks, done func()) {
	stops := make([]func(), len(run))
	for i, m := range run[1:] {
		hbCtx, stop := context.WithCancel(bg)
		hbDone := make(chan struct{})
		go func() {
			defer close(hbDone)
			heartbeat(hbCtx, m, lease, log)
		}()
		stops[i+1] = func() { stop(); <-hbDone }
	}
	for i, m := range run {
		if stops[i] != nil {
			stops[i]() // its own heartbeat takes over in process
		}
		ok := c.process(handlerCtx, bg, m, handler, lease, log, acks)
		done()
		if !ok && i+1 < len(run) {
			rest := run[i+1:]
			for _, stop := range stops[i+1:] {
				stop()
			}
			log.Warn("skipq: a message of the group failed; nacking the rest of its batch to keep the group's order",
				"groupId", m.GroupID, "nacked", len(rest))
			c.nackAll(bg, rest, log)
			for range rest {
				done()
			}
			return
		}
	}
}

// process runs the handler on one message while heartbeating its lease, then
// settles it unless it was settled already: an ack rides on the next
// receive when one is about to be sent (pendingAcks). It reports whether
// the handler succeeded.
func (c *Client) process(handlerCtx, bg context.Context, m *Received, handler Handler, lease time.Duration, log *slog.Logger, acks *pendingAcks) bool {
	log = log.With("messageId", m.MessageID, "receiveCount", m.ReceiveCount)
	hbCtx, stopHeartbeat := context.WithCancel(bg)
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		heartbeat(hbCtx, m, lease, log)
	}()
	err := runHandler(handlerCtx, m, handler, log)
	stopHeartbeat()
	<-hbDone // no extend is in flight once the message is settled

	if m.done() {
		return err == nil // the handler settled it, or its lease was lost (logged)
	}
	ctx, cancel := context.WithTimeout(bg, settleTimeout)
	defer cancel()
	if err == nil {
		if acks.offer(m) {
			return true
		}
		if err := m.Ack(ctx); err != nil {
			log.Error("skipq: ack failed; the message will be delivered again", "err", err)
		}
		return true
	}
	log.Warn("skipq: handler failed; nacking", "err", err)
	if err := m.NackWithReason(ctx, reasonOf(err)); err != nil {
		log.Error("skipq: nack failed; the message becomes available when its lease ends", "err", err)
	}
	return false
}

// pendingAcks carry the acks of handled messages to the consumer loop's
// next receive, which sends them along (AckAndReceive): one request and one
// commit for "ack these, give me more". They are only taken while the loop
// waits for a free handler, that is right before its next receive, which
// the handler's own finish lets go; while a receive is out (a long-poll may
// wait WaitSeconds), a handler acks on its own, so no ack waits on a
// long-poll.
type pendingAcks struct {
	mu      sync.Mutex
	open    bool // the loop is between receives
	handles []string
}

// between marks the loop as waiting for a handler: acks offered now go with
// the next receive.
func (p *pendingAcks) between() {
	p.mu.Lock()
	p.open = true
	p.mu.Unlock()
}

// offer takes m's ack for the next receive, settling m on the client's
// side, and reports whether it did (false: ack it now).
func (p *pendingAcks) offer(m *Received) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.open || len(p.handles) >= MaxHandles || m.ReceiptHandle == "" {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != stateOpen {
		return false
	}
	m.state = stateSettled // never sent again by m, so never settled twice
	p.handles = append(p.handles, m.ReceiptHandle)
	return true
}

// take returns the acks for the receive the loop is sending, and closes
// the window until the receive returned.
func (p *pendingAcks) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open = false
	h := p.handles
	p.handles = nil
	return h
}

// stop closes the window for good: receiving stopped (flush acks what is
// left).
func (p *pendingAcks) stop() {
	p.mu.Lock()
	p.open = false
	p.mu.Unlock()
}

// flush acks what no receive carried (receiving stopped first).
func (p *pendingAcks) flush(bg context.Context, c *Client, log *slog.Logger) {
	p.mu.Lock()
	h := p.handles
	p.handles = nil
	p.mu.Unlock()
	if len(h) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(bg, settleTimeout)
	defer cancel()
	if _, err := c.AckAll(ctx, h); err != nil {
		log.Error("skipq: ack failed; the messages will be delivered again", "err", err, "messages", len(h))
	}
}

// ackedWith reports the acks a receive carried. A receive that failed may
// or may not have acked them (a 429 or 503 did not: the client retried it
// and then gave up; a lost connection leaves it unknown), so they are
// acked again on their own: one the receive did ack answers receipt_stale.
func ackedWith(bg context.Context, c *Client, handles []string, acked SettleResult, err error, log *slog.Logger) {
	if err == nil {
		for _, f := range acked.Failed {
			log.Error("skipq: ack failed; the message will be delivered again", "code", f.Code, "err", f.Message)
		}
		return
	}
	ctx, cancel := context.WithTimeout(bg, settleTimeout)
	defer cancel()
	if _, err := c.AckAll(ctx, handles); err != nil {
		log.Error("skipq: ack failed; the messages will be delivered again", "err", err, "messages", len(handles))
	}
}

// runHandler calls handler, turning a panic into an error.
func runHandler(ctx context.Context, m *Received, handler Handler, log *slog.Logger) (err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("skipq: handler panicked", "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("skipq: handler panicked: %v", p)
		}
	}()
	return handler(ctx, m)
}

// heartbeat extends m's lease every third of it until ctx ends.
func heartbeat(ctx context.Context, m *Received, lease time.Duration, log *slog.Logger) {
	t := time.NewTicker(max(lease/3, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := m.ExtendVisibility(ctx, lease)
		switch {
		case err == nil:
		case ctx.Err() != nil, errors.Is(err, ErrSettled):
			return
		case IsReceiptStale(err):
			log.Warn("skipq: lease lost while the handler runs; the message will be delivered again", "err", err)
			return
		default:
			log.Warn("skipq: extending the lease failed; trying again at the next heartbeat", "err", err)
		}
	}
}

// release gives messages that were never handed to a handler back at once.
func (c *Client) release(bg context.Context, msgs []*Received, log *slog.Logger) {
	if len(msgs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(bg, settleTimeout)
	defer cancel()
	if _, err := c.ExtendVisibilityAll(ctx, handlesOf(msgs), 0); err != nil {
		log.Warn("skipq: releasing unhandled messages failed; they become available when their lease ends", "err", err)
	}
}

func (c *Client) nackAll(bg context.Context, msgs []*Received, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(bg, settleTimeout)
	defer cancel()
	if _, err := c.NackAll(ctx, handlesOf(msgs)); err != nil {
		log.Warn("skipq: nack failed; the messages become available when their lease ends", "err", err)
	}
}

func handlesOf(msgs []*Received) []string {
	hs := make([]string, 0, len(msgs))
	for _, m := range msgs {
		if m.ReceiptHandle != "" {
			hs = append(hs, m.ReceiptHandle)
		}
	}
	return hs
}

// reasonOf is a handler's error as a nack's reason: its text, cut to
// MaxReasonBytes at a rune boundary.
func reasonOf(err error) string {
	r := strings.ToValidUTF8(err.Error(), "\uFFFD")
	if len(r) <= MaxReasonBytes {
		return r
	}
	cut := MaxReasonBytes
	for !utf8.RuneStart(r[cut]) {
		cut--
	}
	return r[:cut]
}
