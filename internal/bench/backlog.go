package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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
	if res.EmptyMsgsPerS, res.Empty, err = e.drive(ctx, newHTTPWorkload(e.http, ns, qe, p), p, nil); err != nil {
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
	if res.MsgsPerS, res.HTTP, err = e.drive(ctx, newHTTPWorkload(e.http, ns, qb, p), p, nil); err != nil {
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

// bulkLoad runs one loading statement on a connection of its own (named
// setupApp), then ANALYZE of the tables it filled. It returns the seconds
// both took.
func (e *env) bulkLoad(ctx context.Context, tables, sql string, args ...any) (float64, error) {
	cfg, err := pgx.ParseConfig(e.dbURL)
	if err != nil {
		return 0, err
	}
	cfg.RuntimeParams["application_name"] = setupApp
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	start := time.Now()
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		return 0, fmt.Errorf("load: %w", err)
	}
	if _, err := conn.Exec(ctx, "ANALYZE "+tables); err != nil {
		return 0, fmt.Errorf("analyze: %w", err)
	}
	return round(time.Since(start).Seconds(), 1), nil
}
