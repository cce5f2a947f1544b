package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// lockClients and lockQueues are the locks scenario's load: clients sending
// one message per request, spread over queues that no held lock touches.
const (
	lockClients = 16
	lockQueues  = 4
	// lockWaiters keep sending to the held group and resending the held
	// key, each request until lockWaiterTimeout, so that new sends that
	// must wait keep reaching the node's shared statements all along.
	lockWaiters       = 2
	lockWaiterTimeout = time.Second
)

// Targets of the locks scenario: the other queues keep 90 % of their
// throughput, and their p99 stays at 50 ms.
const (
	lockTargetRatio = 0.9
	lockTargetP99MS = 50
)

// locks measures what a lock held by an outside transaction costs the
// requests that do not need it: lockClients clients send to other queues,
// with nothing held, and while an SQL transaction holds a FIFO group and
// another an idempotency key (each left open with a skipq.send), and sends
// to that group and resends of that key keep waiting on them. After a
// warm-up of Options.Warmup, the windows run nothing held (Options.Duration),
// held (twice that), nothing held again: drift over the run (the tables
// growing, autovacuum, other load) falls on both sides alike.
func (e *env) locks(ctx context.Context) (*LocksResult, error) {
	ns, err := e.startNodes(ctx)
	if err != nil {
		return nil, err
	}
	defer ns.stop()
	queues := make([]string, lockQueues)
	for i := range queues {
		queues[i] = queueName(fmt.Sprintf("locks-other%d", i))
		if err := e.http.createQueue(ctx, ns.at(i), queues[i], ""); err != nil {
			return nil, err
		}
	}
	groupQueue, keyQueue := queueName("locks-group"), queueName("locks-key")
	if err := e.http.createQueue(ctx, ns.at(0), groupQueue, `{"fifo":true}`); err != nil {
		return nil, err
	}
	if err := e.http.createQueue(ctx, ns.at(0), keyQueue, ""); err != nil {
		return nil, err
	}
	res := &LocksResult{Clients: lockClients, Queues: lockQueues, Seconds: 2 * e.o.Duration.Seconds()}

	e.logf("locks: %d clients sending to %d queues, nothing held", lockClients, lockQueues)
	if _, err := e.sendWindow(ctx, ns, queues, e.o.Warmup); err != nil {
		return res, err
	}
	before, err := e.sendWindow(ctx, ns, queues, e.o.Duration)
	if err != nil {
		return res, err
	}
	e.logf("locks: the same while SQL transactions hold a FIFO group and a key")
	held, err := e.whileHeld(ctx, ns, queues, groupQueue, keyQueue, res)
	if err != nil {
		return res, err
	}
	e.logf("locks: nothing held again")
	after, err := e.sendWindow(ctx, ns, queues, e.o.Duration)
	if err != nil {
		return res, err
	}
	res.Free, res.Held = summarize(before, after), summarize(held)
	if res.Free.MsgsPerS > 0 {
		res.Ratio = round(res.Held.MsgsPerS/res.Free.MsgsPerS, 3)
	}
	e.logf("  free %s msgs/s p99 %.2f ms; held %s msgs/s p99 %.2f ms; ratio %.2f",
		thousands(res.Free.MsgsPerS), res.Free.P99MS, thousands(res.Held.MsgsPerS), res.Held.P99MS, res.Ratio)
	return res, nil
}

// whileHeld holds a FIFO group of groupQueue and a key of keyQueue in SQL
// transactions, keeps sends waiting on them, and runs a window of twice
// Options.Duration meanwhile.
func (e *env) whileHeld(ctx context.Context, ns *nodes, queues []string, groupQueue, keyQueue string, res *LocksResult) (sendSamples, error) {
	release, err := e.holdGroupAndKey(ctx, groupQueue, keyQueue)
	if err != nil {
		return sendSamples{}, err
	}
	defer release()
	wctx, stopWaiters := context.WithCancel(ctx)
	var waiters sync.WaitGroup
	var waitersMu sync.Mutex
	for i := range lockWaiters {
		for _, w := range []struct{ queue, body string }{
			{groupQueue, `{"body":"waits","groupId":"g1"}`},
			{keyQueue, `{"body":"held","messageId":"k1"}`},
		} {
			waiters.Go(func() {
				u := queuePath(ns.at(i), w.queue) + "/messages"
				for wctx.Err() == nil {
					rctx, cancel := context.WithTimeout(wctx, lockWaiterTimeout)
					err := e.http.do(rctx, http.MethodPost, u, []byte(w.body), http.StatusCreated, nil)
					cancel()
					waitersMu.Lock()
					if err == nil {
						res.WaitersAnsweredWhileHeld++
					} else {
						res.WaitsStarted++
					}
					waitersMu.Unlock()
				}
			})
		}
	}
	defer func() {
		stopWaiters()
		waiters.Wait()
	}()
	if err := e.awaitLockWaits(ctx); err != nil {
		return sendSamples{}, err
	}
	return e.sendWindow(ctx, ns, queues, 2*e.o.Duration)
}

// holdGroupAndKey opens two SQL transactions, one holding groupQueue's
// group g1 and one the key k1 of keyQueue, and returns what rolls them
// back.
func (e *env) holdGroupAndKey(ctx context.Context, groupQueue, keyQueue string) (release func(), err error) {
	var txs []pgx.Tx
	release = func() {
		for _, tx := range txs {
			_ = tx.Rollback(context.Background())
			_ = tx.Conn().Close(context.Background())
		}
	}
	for _, hold := range []struct{ sql, queue string }{
		{"SELECT skipq.send($1, 'held', group_id => 'g1')", groupQueue},
		{"SELECT skipq.send($1, 'held', message_id => 'k1')", keyQueue},
	} {
		conn, err := pgx.Connect(ctx, e.dbURL)
		if err != nil {
			release()
			return nil, err
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			_ = conn.Close(ctx)
			release()
			return nil, err
		}
		txs = append(txs, tx)
		if _, err := tx.Exec(ctx, hold.sql, hold.queue); err != nil {
			release()
			return nil, fmt.Errorf("hold %s: %w", hold.queue, err)
		}
	}
	return release, nil
}

// awaitLockWaits returns once a session of the database waits for a lock
// (the sends that must wait reached it).
func (e *env) awaitLockWaits(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var waiting bool
		if err := e.mon.QueryRow(ctx, monitorMark+"SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted)").Scan(&waiting); err != nil {
			return err
		}
		if waiting {
			return nil
		}
		if !sleepCtx(ctx, 10*time.Millisecond) {
			return ctx.Err()
		}
	}
	return errors.New("no send waited on the held locks within 30 s")
}

// sendSamples are the answered sends of a window: their latencies in ms,
// and the window's length.
type sendSamples struct {
	latMS []float64
	secs  float64
}

// summarize sums windows up.
func summarize(windows ...sendSamples) LocksWindow {
	var lat []float64
	secs := 0.0
	for _, w := range windows {
		lat, secs = append(lat, w.latMS...), secs+w.secs
	}
	slices.Sort(lat)
	w := LocksWindow{Sent: len(lat)}
	if len(lat) > 0 && secs > 0 {
		w.MsgsPerS = round(float64(len(lat))/secs, 1)
		w.P50MS, w.P99MS, w.MaxMS = round(quantile(lat, 0.5), 2), round(quantile(lat, 0.99), 2), round(lat[len(lat)-1], 2)
	}
	return w
}

// sendWindow runs lockClients clients, each sending one message per request
// to one of queues, for d.
func (e *env) sendWindow(ctx context.Context, ns *nodes, queues []string, d time.Duration) (sendSamples, error) {
	wctx, stop := context.WithTimeout(ctx, d)
	defer stop()
	var mu sync.Mutex
	var lat []float64
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for i := range lockClients {
		s := newSender(e.http, ns.at(i), queues[i%len(queues)], 1)
		wg.Go(func() {
			var mine []float64
			for {
				t0 := time.Now()
				err := s.send(wctx)
				if wctx.Err() != nil {
					break
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					break
				}
				mine = append(mine, float64(time.Since(t0).Microseconds())/1000)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return sendSamples{latMS: lat, secs: time.Since(start).Seconds()}, firstErr
}

// LocksResult is the locks scenario: clients sending to queues no held
// lock touches, with nothing held and while SQL transactions hold a FIFO
// group and an idempotency key that other sends wait for.
type LocksResult struct {
	Clients int         `json:"clients"`
	Queues  int         `json:"queues"`
	Seconds float64     `json:"seconds"` // the held window; the free ones (before and after it) together as long
	Free    LocksWindow `json:"free"`
	Held    LocksWindow `json:"held"`
	Ratio   float64     `json:"ratio"` // held / free msgs/s
	// WaitsStarted counts the sends to the held group or key that gave up
	// waiting (each after a second), WaitersAnsweredWhileHeld those that
	// were answered (none should be: they must wait).
	WaitsStarted             int `json:"waits_started"`
	WaitersAnsweredWhileHeld int `json:"waiters_answered_while_held"`
}

// LocksWindow is one window of the locks scenario.
type LocksWindow struct {
	Sent     int     `json:"sent"`
	MsgsPerS float64 `json:"msgs_per_s"`
	P50MS    float64 `json:"p50_ms"`
	P99MS    float64 `json:"p99_ms"`
	MaxMS    float64 `json:"max_ms"`
}

func writeLocks(w io.Writer, l *LocksResult) {
	fmt.Fprintf(w, "locks: %d clients sending one message per request to %d queues, %.0f s held between two windows of %.0f s with nothing held\n",
		l.Clients, l.Queues, l.Seconds, l.Seconds/2)
	fmt.Fprintf(w, "  %-36s %10s %8s %8s %8s\n", "window", "msgs/s", "p50 ms", "p99 ms", "max ms")
	for _, x := range []struct {
		name string
		w    LocksWindow
	}{{"nothing held", l.Free}, {"a FIFO group and a key held by SQL", l.Held}} {
		fmt.Fprintf(w, "  %-36s %10s %8.2f %8.2f %8.2f\n", x.name, thousands(x.w.MsgsPerS), x.w.P50MS, x.w.P99MS, x.w.MaxMS)
	}
	fmt.Fprintf(w, "  held / nothing held %.2f; sends to the held group or key: %d gave up waiting, %d answered while held\n\n",
		l.Ratio, l.WaitsStarted, l.WaitersAnsweredWhileHeld)
}
