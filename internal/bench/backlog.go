package bench

import (
	"context"
	"fmt"
	"io"
)

// backlogPoint is the lifecycle run behind the backlog: batch 1, 4 pairs.
var backlogPoint = Point{Batch: 1, Pairs: 4}

// backlog compares the batch-1 lifecycle on an empty queue with the same
// run on a queue holding Options.Preload available messages, both measured
// here, back to back. It explains skipq's claim at the backlog's head and
// on the drained empty queue, and reports the slowest empty-queue claim of
// the whole run (the lifecycle points' included).
func (e *env) backlog(ctx context.Context, lifecycle []LifecyclePoint) (*BacklogResult, error) {
	ns, err := e.startNodes(ctx)
	if err != nil {
		return nil, err
	}
	defer ns.stop()
	p := backlogPoint
	res := &BacklogResult{Preloaded: e.o.Preload, Batch: p.Batch, Pairs: p.Pairs}
	runFor := e.o.Warmup.Seconds() + e.o.Duration.Seconds()

	// The empty-queue figure.
	qe := queueName("backlog-empty")
	if err := e.http.createQueue(ctx, ns.at(0), qe, ""); err != nil {
		return nil, err
	}
	e.checkpoint(ctx)
	e.logf("backlog: batch %d × %d pairs on an empty queue", p.Batch, p.Pairs)
	if res.EmptyMsgsPerS, res.Empty, err = e.drive(ctx, newHTTPWorkload(e.http, ns, qe, p, e.o.ConsumerShape), p, nil); err != nil {
		return nil, err
	}
	if err := e.deleteLeftovers(ctx, qe); err != nil {
		return nil, err
	}
	emptyClaim, err := e.explainClaim(ctx, qe, 1, fmt.Sprintf("HTTP lifecycle batch %d × %d pairs, %.0f s, drained", p.Batch, p.Pairs, runFor))
	if err != nil {
		return nil, err
	}
	res.EmptyClaim = emptyClaim
	for _, lp := range lifecycle {
		if lp.EmptyClaim != nil && lp.EmptyClaim.ExecutionMS > res.EmptyClaim.ExecutionMS {
			res.EmptyClaim = lp.EmptyClaim
		}
	}
	res.EmptyClaimMS = res.EmptyClaim.ExecutionMS

	// The backlog: one INSERT … SELECT generate_series, then ANALYZE.
	qb := queueName("backlog")
	if err := e.http.createQueue(ctx, ns.at(0), qb, ""); err != nil {
		return nil, err
	}
	e.logf("backlog: preloading %d messages", e.o.Preload)
	if res.PreloadSeconds, err = e.preload(ctx, qb, e.o.Preload); err != nil {
		return nil, err
	}
	if res.ClaimExplainBefore, err = e.explainClaim(ctx, qb, 1, fmt.Sprintf("preload of %d messages and ANALYZE", e.o.Preload)); err != nil {
		return nil, err
	}
	e.checkpoint(ctx)
	e.logf("backlog: batch %d × %d pairs behind the backlog", p.Batch, p.Pairs)
	if res.MsgsPerS, res.HTTP, err = e.drive(ctx, newHTTPWorkload(e.http, ns, qb, p, e.o.ConsumerShape), p, nil); err != nil {
		return nil, err
	}
	if res.ClaimExplain, err = e.explainClaim(ctx, qb, 1, fmt.Sprintf("HTTP lifecycle batch %d × %d pairs behind the backlog, %.0f s", p.Batch, p.Pairs, runFor)); err != nil {
		return nil, err
	}
	res.MsgsPerS = round(res.MsgsPerS, 0)
	res.EmptyMsgsPerS = round(res.EmptyMsgsPerS, 0)
	if res.EmptyMsgsPerS > 0 {
		res.Ratio = round(res.MsgsPerS/res.EmptyMsgsPerS, 3)
	}
	e.logf("  backlog %.0f msgs/s, empty %.0f msgs/s, ratio %.2f", res.MsgsPerS, res.EmptyMsgsPerS, res.Ratio)

	// A database of our own is dropped at the end; in someone else's, the
	// backlog goes now.
	if e.o.DatabaseURL != "" {
		e.logf("backlog: removing the backlog")
		if err := e.deleteLeftovers(ctx, qb); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// preload inserts n available messages into a queue in one statement and
// analyzes the table. It returns the seconds it took.
func (e *env) preload(ctx context.Context, queue string, n int) (float64, error) {
	return e.bulkLoad(ctx, "skipq.messages, skipq.ready", `
INSERT INTO skipq.messages (queue_id, message_id, body, sent_at, visible_at, max_receive_count, ready)
SELECT (SELECT id FROM skipq.queues WHERE name = $1), 'preload-' || g, $2::bytea, now(), now(), 1024, true
FROM generate_series(1, $3::int) AS g`, queue, []byte(payload), n)
}

// BacklogResult is batch-1 throughput behind a preloaded backlog.
type BacklogResult struct {
	Preloaded      int     `json:"preloaded"`
	MsgsPerS       float64 `json:"msgs_per_s"`
	EmptyMsgsPerS  float64 `json:"empty_msgs_per_s"`
	Ratio          float64 `json:"ratio"`
	Batch          int     `json:"batch"`
	Pairs          int     `json:"pairs"`
	PreloadSeconds float64 `json:"preload_s"`
	// EmptyClaimMS is the slowest claim on a drained queue right after a
	// heavy run (EXPLAIN ANALYZE execution time), over every such queue of
	// this run; EmptyClaim is that measurement.
	EmptyClaimMS float64  `json:"empty_claim_ms"`
	EmptyClaim   *Explain `json:"empty_claim"`
	// The claim at the backlog's head: freshly analyzed, and after the run.
	ClaimExplain       *Explain  `json:"claim_explain"`
	ClaimExplainBefore *Explain  `json:"claim_explain_before"`
	HTTP               *RunStats `json:"http_stats,omitempty"`
	Empty              *RunStats `json:"empty_stats,omitempty"`
}

// writeBacklog is the backlog section of the text report.
func writeBacklog(w io.Writer, b *BacklogResult) {
	fmt.Fprintf(w, "backlog: batch %d × %d pairs behind %s preloaded messages (preload %.1f s)\n",
		b.Batch, b.Pairs, thousands(float64(b.Preloaded)), b.PreloadSeconds)
	fmt.Fprintf(w, "  %s msgs/s vs %s on an empty queue: %.2f\n", thousands(b.MsgsPerS), thousands(b.EmptyMsgsPerS), b.Ratio)
	for _, x := range []struct {
		name string
		e    *Explain
	}{{"claim at the backlog, analyzed", b.ClaimExplainBefore}, {"claim at the backlog, after the run", b.ClaimExplain}, {"claim on an empty queue after a heavy run", b.EmptyClaim}} {
		if x.e != nil {
			fmt.Fprintf(w, "  %s: %.3f ms execution, %d shared hit + %d read (%s)\n", x.name, x.e.ExecutionMS, x.e.SharedHit, x.e.SharedRead, x.e.After)
		}
	}
	fmt.Fprintln(w)
}
