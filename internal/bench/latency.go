package bench

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// latencyReceivers is how many receivers wait at once.
const latencyReceivers = 4

// latency measures wake-up: receivers already waiting in long-polls, one
// sender sending one message at a time; each sample is the time from the
// send's response to the waiting receive's response. With several nodes the
// receivers wait on the other nodes, so the wake-up crosses nodes (NOTIFY).
func (e *env) latency(ctx context.Context) (*LatencyResult, error) {
	ns, err := e.startNodes(ctx)
	if err != nil {
		return nil, err
	}
	defer ns.stop()
	q := queueName("latency")
	sendNode := ns.urls[0]
	recvNodes := ns.urls[:1]
	path := "same node"
	if len(ns.urls) > 1 {
		recvNodes, path = ns.urls[1:], "across nodes (NOTIFY)"
	}
	if err := e.http.createQueue(ctx, sendNode, q, ""); err != nil {
		return nil, err
	}
	e.logf("wake latency: %d samples, receivers %s", e.o.LatencySamples, path)

	rctx, stop := context.WithCancel(ctx)
	defer stop()
	arrivals := make(chan arrival, latencyReceivers)
	errc := make(chan error, latencyReceivers)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	for i := range latencyReceivers {
		r := newReceiver(e.http, recvNodes[i%len(recvNodes)], q, 1, 20)
		wg.Go(func() {
			for rctx.Err() == nil {
				got, err := r.receive(rctx)
				at := time.Now()
				if err != nil {
					if rctx.Err() == nil {
						errc <- err
					}
					return
				}
				for _, m := range got.Messages {
					arrivals <- arrival{at, m.Body}
					if _, err := r.ack(rctx, []string{m.ReceiptHandle}); err != nil && rctx.Err() == nil {
						errc <- err
						return
					}
				}
			}
		})
	}
	if err := e.waitForWaiters(ctx, recvNodes, latencyReceivers, 30*time.Second); err != nil {
		return nil, err
	}

	const warmup = 20
	var lat, sendRTT []float64
	cpu0 := e.cpuSnapshot(ctx)
	for i := range warmup + e.o.LatencySamples {
		body := "latency-" + strconv.Itoa(i)
		req := []byte(`{"body":"` + body + `"}`)
		t0 := time.Now()
		if err := e.http.do(ctx, http.MethodPost, queuePath(sendNode, q)+"/messages", req, http.StatusCreated, nil); err != nil {
			return nil, err
		}
		t1 := time.Now()
		timeout := time.NewTimer(5 * time.Second)
	wait:
		for {
			select {
			case a := <-arrivals:
				if a.body != body {
					continue // a late copy of an earlier sample cannot happen; be safe
				}
				if i >= warmup {
					lat = append(lat, max(0, a.at.Sub(t1).Seconds()*1000))
					sendRTT = append(sendRTT, t1.Sub(t0).Seconds()*1000)
				}
				break wait
			case err := <-errc:
				timeout.Stop()
				return nil, err
			case <-timeout.C:
				return nil, fmt.Errorf("sample %d: no waiting receiver got the message within 5 s", i)
			case <-ctx.Done():
				timeout.Stop()
				return nil, ctx.Err()
			}
		}
		timeout.Stop()
		// Let the receiver ack and wait again, like an idle service.
		if !sleepCtx(ctx, 2*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
	cpu := cpu0.share(e.cpuSnapshot(ctx))
	e.noteCPU(cpu)
	res := summarizeLatency(lat, sendRTT, path)
	res.CPU = cpu
	return res, nil
}

// summarizeLatency is the result of wake-latency samples (ms) and the
// sends' round trips.
func summarizeLatency(lat, sendRTT []float64, path string) *LatencyResult {
	slices.Sort(lat)
	slices.Sort(sendRTT)
	var sum float64
	for _, v := range lat {
		sum += v
	}
	return &LatencyResult{
		P50: round(quantile(lat, 0.50), 3), P90: round(quantile(lat, 0.90), 3), P99: round(quantile(lat, 0.99), 3),
		Max: round(lat[len(lat)-1], 3), Mean: round(sum/float64(len(lat)), 3),
		Samples: len(lat), Receivers: latencyReceivers, Path: path, SendP50: round(quantile(sendRTT, 0.5), 3),
	}
}

// arrival is a message a waiting receiver got, and when.
type arrival struct {
	at   time.Time
	body string
}

// quantile of sorted values (nearest rank).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// waitForWaiters polls the nodes' long-poll gauges until they hold at least
// n waiters together.
func (e *env) waitForWaiters(ctx context.Context, urls []string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		total := 0
		var lastErr error
		for _, u := range urls {
			w, err := e.http.waiters(ctx, u)
			if err != nil {
				lastErr = err
			}
			total += w
		}
		if total >= n {
			return nil
		}
		if time.Now().After(deadline) {
			if lastErr != nil {
				return fmt.Errorf("waiting for %d long-polls: %w", n, lastErr)
			}
			return fmt.Errorf("only %d of %d long-polls are waiting after %s", total, n, timeout)
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
}
