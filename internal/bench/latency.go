package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

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

// writeLatency is the wake-latency section of the text report.
func writeLatency(w io.Writer, l *LatencyResult) {
	fmt.Fprintf(w, "wake latency (send answered → waiting receive answered, %s), %d samples:\n", l.Path, l.Samples)
	fmt.Fprintf(w, "  p50 %.2f ms   p90 %.2f ms   p99 %.2f ms   max %.2f ms   (send round trip p50 %.2f ms)\n\n",
		l.P50, l.P90, l.P99, l.Max, l.SendP50)
}
