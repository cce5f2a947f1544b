package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// LatencyResult is the wake latency: a send's response to the waiting
// receive's response.
type LatencyResult struct {
	P50       float64  `json:"p50"`
	P90       float64  `json:"p90"`
	P99       float64  `json:"p99"`
	Max       float64  `json:"max"`
	Mean      float64  `json:"mean"`
	Samples   int      `json:"samples"`
	Receivers int      `json:"receivers"`
	Path      string   `json:"path"` // "same node" or "across nodes (NOTIFY)"
	SendP50   float64  `json:"send_p50"`
	CPU       CPUShare `json:"cpu"`
}

// latencyReceivers is how many receivers wait at once.
const latencyReceivers = 4

// arrival is a message a waiting receiver got, and when.
type arrival struct {
	at   time.Time
	body string
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

// sampleWakes sends one message at a time with send (body prefix and a
// number) while receivers wait, and times each from the send's answer to
// the arrival of that body: a 20-sample warm-up, then Options.LatencySamples.
// what names the receivers in errors.
func (e *env) sampleWakes(ctx context.Context, send func(ctx context.Context, body string) error, arrivals <-chan arrival,
	errc <-chan error, prefix, what string) (*LatencyResult, error) {
	const warmup = 20
	var lat, sendRTT []float64
	for i := range warmup + e.o.LatencySamples {
		body := prefix + strconv.Itoa(i)
		t0 := time.Now()
		if err := send(ctx, body); err != nil {
			return nil, err
		}
		t1 := time.Now()
		select {
		case a := <-arrivals:
			if a.body != body {
				return nil, fmt.Errorf("sample %d: received %q", i, a.body)
			}
			if i >= warmup {
				lat = append(lat, max(0, a.at.Sub(t1).Seconds()*1000))
				sendRTT = append(sendRTT, t1.Sub(t0).Seconds()*1000)
			}
		case err := <-errc:
			return nil, err
		case <-time.After(5 * time.Second):
			return nil, fmt.Errorf("sample %d: no %s got the message within 5 s", i, what)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if !sleepCtx(ctx, 2*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
	return summarizeLatency(lat, sendRTT, "same node"), nil
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
