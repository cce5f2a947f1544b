package bench

import (
	"context"
	"fmt"
	"io"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// workload is one side of a lifecycle run: how worker i sends a batch and
// how it receives and acks one.
type workload interface {
	// produce sends one batch and returns how many messages it sent.
	produce(ctx context.Context, i int) (int, error)
	// consume receives up to a batch, acks what it got and returns how many
	// messages were acked (0 when the receive found nothing). A consumer of
	// the shape AckWithNextReceive acks, in the same call, what its previous
	// call got, and holds what this one got.
	consume(ctx context.Context, i int) (int, error)
}

// heldSettler is a workload whose consumers hold what they got until their
// next call (AckWithNextReceive).
type heldSettler interface {
	// settleHeld acks what consumer i holds, once it stopped consuming,
	// and returns how many messages were acked.
	settleHeld(ctx context.Context, i int) (int, error)
}

// credits bound the messages between send and ack, so producers cannot
// outrun consumers and grow the queue: the run measures the steady
// lifecycle, as a client that sends, receives and acks in turn would.
type credits struct{ ch chan struct{} }

func newCredits(n int) *credits {
	c := &credits{ch: make(chan struct{}, n)}
	for range n {
		c.ch <- struct{}{}
	}
	return c
}

func (c *credits) acquire(ctx context.Context, n int) error {
	for i := range n {
		select {
		case <-c.ch:
		case <-ctx.Done():
			c.release(i)
			return ctx.Err()
		}
	}
	return nil
}

func (c *credits) release(n int) {
	for range n {
		select {
		case c.ch <- struct{}{}:
		default:
		}
	}
}

// drive runs p.Pairs producers and p.Pairs consumers of w: a warm-up, then
// one measured window of Options.Duration (watched by a probe, and
// CPU-profiled into profile when it is not nil), then a drain. It returns
// acked messages per second in the window.
func (e *env) drive(ctx context.Context, w workload, p Point, profile io.Writer) (float64, *RunStats, error) {
	return e.driveIn(ctx, e.mon, w, p, profile)
}

// driveIn is drive of a workload that runs in the database mon (a monitor
// pool) is on, which the probe watches.
func (e *env) driveIn(ctx context.Context, mon *pgxpool.Pool, w workload, p Point, profile io.Writer) (float64, *RunStats, error) {
	ctx, cancelAll := context.WithCancel(ctx)
	defer cancelAll()
	prodCtx, stopProducers := context.WithCancel(ctx)
	defer stopProducers()
	consCtx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()

	var sent, acked atomic.Int64
	cr := newCredits(4 * p.Pairs * p.Batch)
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		cancelAll()
	}
	var wg sync.WaitGroup
	for i := range p.Pairs {
		wg.Go(func() {
			for prodCtx.Err() == nil {
				if cr.acquire(prodCtx, p.Batch) != nil {
					return
				}
				n, err := w.produce(prodCtx, i)
				if err != nil {
					if prodCtx.Err() == nil {
						fail(fmt.Errorf("producer %d: %w", i, err))
					}
					return
				}
				sent.Add(int64(n))
			}
		})
		wg.Go(func() {
			for consCtx.Err() == nil {
				n, err := w.consume(consCtx, i)
				if err != nil {
					if consCtx.Err() == nil {
						fail(fmt.Errorf("consumer %d: %w", i, err))
					}
					return
				}
				acked.Add(int64(n))
				cr.release(n)
			}
			// The last acks of a consumer that holds what it got until its
			// next call: counted like every other (the drain waits for
			// them), not left for deleteLeftovers. Not after a failure.
			if s, ok := w.(heldSettler); ok && ctx.Err() == nil {
				n, err := s.settleHeld(ctx, i)
				acked.Add(int64(n))
				if err != nil {
					fail(fmt.Errorf("consumer %d: %w", i, err))
				}
			}
		})
	}
	e.rss.during(true)
	defer e.rss.during(false)

	finish := func() (float64, *RunStats, error) {
		cancelAll()
		wg.Wait()
		if firstErr != nil {
			return 0, nil, firstErr
		}
		return 0, nil, ctx.Err()
	}
	if !sleepCtx(ctx, e.o.Warmup) {
		return finish()
	}
	pr := e.startProbe(ctx, mon)
	stopProfile := e.startCPUProfile(profile)
	a0, t0 := acked.Load(), time.Now()
	ok := sleepCtx(ctx, e.o.Duration)
	a1, t1 := acked.Load(), time.Now()
	stopProfile()
	if !ok {
		pr.stopWait()
		return finish()
	}
	stats := pr.stop(ctx)
	stats.Acked = a1 - a0
	stats.perMessage()
	rate := float64(a1-a0) / t1.Sub(t0).Seconds()

	// Drain: no more sends; receivers take what is left (up to 3 s).
	stopProducers()
	for deadline := time.Now().Add(3 * time.Second); acked.Load() < sent.Load() && time.Now().Before(deadline); {
		if !sleepCtx(ctx, 10*time.Millisecond) {
			break
		}
	}
	stopConsumers()
	wg.Wait()
	if firstErr != nil {
		return 0, nil, firstErr
	}
	return rate, stats, ctx.Err()
}

// startCPUProfile profiles the nodes' work into w (nil: nothing) until the
// returned stop: this process when the nodes run in it, else the first
// node's process.
func (e *env) startCPUProfile(w io.Writer) (stop func()) {
	if w == nil {
		return func() {}
	}
	if len(e.nodeProcs) > 0 {
		stopNode, err := profileNodeProcess(e.nodeProcs[0], w)
		if err != nil {
			e.logf("cpu profile: %v", err)
			return func() {}
		}
		return func() {
			if err := stopNode(); err != nil {
				e.logf("cpu profile: %v", err)
			}
		}
	}
	if err := pprof.StartCPUProfile(w); err != nil {
		e.logf("cpu profile: %v", err)
		return func() {}
	}
	return pprof.StopCPUProfile
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// httpWorkload is the lifecycle over skipq's HTTP API: pair i sends to and
// receives from node i mod N. Its consumers settle as shape says.
type httpWorkload struct {
	senders   []*sender
	receivers []*receiver
	shape     ConsumerShape
}

func newHTTPWorkload(c *client, ns *nodes, queue string, p Point, shape ConsumerShape) *httpWorkload {
	w := &httpWorkload{shape: shape}
	for i := range p.Pairs {
		w.senders = append(w.senders, newSender(c, ns.at(i), queue, p.Batch))
		w.receivers = append(w.receivers, newReceiver(c, ns.at(i), queue, p.Batch, 1))
	}
	return w
}

func (w *httpWorkload) produce(ctx context.Context, i int) (int, error) {
	s := w.senders[i]
	return s.n, s.send(ctx)
}

func (w *httpWorkload) consume(ctx context.Context, i int) (int, error) {
	r := w.receivers[i]
	if w.shape == AckWithNextReceive {
		return r.ackWithNextReceive(ctx)
	}
	got, err := r.receive(ctx)
	if err != nil || len(got.Messages) == 0 {
		return 0, err
	}
	handles := r.handles[:0]
	for _, m := range got.Messages {
		handles = append(handles, m.ReceiptHandle)
	}
	r.handles = handles
	n, err := r.ack(ctx, handles)
	if err == nil && n != len(handles) {
		err = fmt.Errorf("ack settled %d of %d fresh receipt handles", n, len(handles))
	}
	return n, err
}

func (w *httpWorkload) settleHeld(ctx context.Context, i int) (int, error) {
	r := w.receivers[i]
	if len(r.held) == 0 {
		return 0, nil
	}
	n, err := r.ack(ctx, r.held)
	if err == nil && n != len(r.held) {
		err = fmt.Errorf("ack settled %d of %d held receipt handles", n, len(r.held))
	}
	r.held = r.held[:0]
	return n, err
}

// deleteLeftovers removes what a run left in its queue (messages whose
// receive was cut off by the end of the run, topic copies not made yet), so
// the queue is empty.
func (e *env) deleteLeftovers(ctx context.Context, queue string) error {
	_, err := e.mon.Exec(ctx, monitorMark+`WITH q AS (SELECT id FROM skipq.queues WHERE name = $1),
pending AS (DELETE FROM skipq.topic_pending WHERE queue_id = (SELECT id FROM q))
DELETE FROM skipq.messages WHERE queue_id = (SELECT id FROM q)`, queue)
	if err != nil {
		return fmt.Errorf("empty %s: %w", queue, err)
	}
	return nil
}

// announceSend is a producer's signal to one waiting consumer (none
// waiting: nothing to do).
func announceSend(avail chan<- struct{}) {
	select {
	case avail <- struct{}{}:
	default:
	}
}

// awaitSend is a consumer's wait when it found nothing: a producer's
// signal, or 100 ms.
func awaitSend(ctx context.Context, avail <-chan struct{}) {
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-avail:
	case <-t.C:
	case <-ctx.Done():
	}
}
