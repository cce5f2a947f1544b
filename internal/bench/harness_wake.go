package bench

import (
	"context"
	"fmt"
	"slices"
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
