package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
)

// lifecycle runs the matrix: for each point, the HTTP lifecycle on a fresh
// queue, skipq's claim on that queue once it drained, then the same
// lifecycle in plain SQL on another fresh queue (the frozen raw baseline),
// in pgmq's shapes on a fresh table and, given pgmq's install file, in real
// pgmq on a fresh queue of it.
func (e *env) lifecycle(ctx context.Context) ([]LifecyclePoint, error) {
	var pgmq *scratchDatabase
	if e.pgmqSQL != nil {
		var err error
		if pgmq, err = e.installPgmq(ctx); err != nil {
			return nil, err
		}
		defer pgmq.drop(context.WithoutCancel(ctx), e)
	}
	ns, err := e.startNodes(ctx)
	if err != nil {
		return nil, err
	}
	defer ns.stop()
	profiled := -1
	if e.o.CPUProfile != nil {
		for i, p := range e.o.Matrix {
			if p.Batch == 1 && (profiled < 0 || p.Pairs > e.o.Matrix[profiled].Pairs) {
				profiled = i
			}
		}
		profiled = max(profiled, 0) // no batch-1 point: the first one
	}
	var out []LifecyclePoint
	for i, p := range e.o.Matrix {
		lp := LifecyclePoint{Batch: p.Batch, Pairs: p.Pairs}
		q := queueName(fmt.Sprintf("lifecycle-b%d-p%d", p.Batch, p.Pairs))
		if err := e.http.createQueue(ctx, ns.at(0), q, ""); err != nil {
			return out, err
		}
		e.checkpoint(ctx)
		var prof io.Writer
		if i == profiled {
			prof = e.o.CPUProfile
		}
		e.logf("lifecycle batch %d × %d pairs over HTTP", p.Batch, p.Pairs)
		if lp.HTTPMsgsPerS, lp.HTTP, err = e.drive(ctx, newHTTPWorkload(e.http, ns, q, p, e.o.ConsumerShape), p, prof); err != nil {
			return out, fmt.Errorf("HTTP batch %d × %d: %w", p.Batch, p.Pairs, err)
		}
		if err := e.deleteLeftovers(ctx, q); err != nil {
			return out, err
		}
		after := fmt.Sprintf("HTTP lifecycle batch %d × %d pairs, %.0f s, drained", p.Batch, p.Pairs, e.o.Warmup.Seconds()+e.o.Duration.Seconds())
		if lp.EmptyClaim, err = e.explainClaim(ctx, q, 1, after); err != nil {
			return out, err
		}
		e.logf("lifecycle batch %d × %d pairs in plain SQL", p.Batch, p.Pairs)
		if lp.RawMsgsPerS, lp.Raw, err = e.rawLifecycle(ctx, p, e.o.ConsumerShape); err != nil {
			return out, fmt.Errorf("raw batch %d × %d: %w", p.Batch, p.Pairs, err)
		}
		e.logf("lifecycle batch %d × %d pairs in pgmq's shapes", p.Batch, p.Pairs)
		if lp.PgmqShapeMsgsPerS, lp.PgmqShape, err = e.pgmqShapeLifecycle(ctx, p, e.o.ConsumerShape); err != nil {
			return out, fmt.Errorf("pgmq_shape batch %d × %d: %w", p.Batch, p.Pairs, err)
		}
		if pgmq != nil {
			e.logf("lifecycle batch %d × %d pairs in real pgmq", p.Batch, p.Pairs)
			if lp.PgmqMsgsPerS, lp.Pgmq, err = e.realPgmqLifecycle(ctx, pgmq, p, e.o.ConsumerShape); err != nil {
				return out, fmt.Errorf("pgmq batch %d × %d: %w", p.Batch, p.Pairs, err)
			}
		}
		lp.HTTPMsgsPerS = round(lp.HTTPMsgsPerS, 0)
		lp.RawMsgsPerS = round(lp.RawMsgsPerS, 0)
		lp.PgmqShapeMsgsPerS = round(lp.PgmqShapeMsgsPerS, 0)
		lp.PgmqMsgsPerS = round(lp.PgmqMsgsPerS, 0)
		lp.Ratio = ratio(lp.HTTPMsgsPerS, lp.RawMsgsPerS)
		lp.PgmqShapeRatio = ratio(lp.HTTPMsgsPerS, lp.PgmqShapeMsgsPerS)
		lp.PgmqRatio = ratio(lp.HTTPMsgsPerS, lp.PgmqMsgsPerS)
		e.logf("  HTTP %.0f msgs/s, raw %.0f msgs/s (ratio %.2f), pgmq_shape %.0f msgs/s (ratio %.2f)",
			lp.HTTPMsgsPerS, lp.RawMsgsPerS, lp.Ratio, lp.PgmqShapeMsgsPerS, lp.PgmqShapeRatio)
		if pgmq != nil {
			e.logf("  real pgmq %.0f msgs/s (ratio %.2f)", lp.PgmqMsgsPerS, lp.PgmqRatio)
		}
		out = append(out, lp)
	}
	return out, nil
}

// ratio is a ÷ b to three places, 0 when b measured nothing.
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return round(a/b, 3)
}

// LifecyclePoint is one batch × pairs point: HTTP and the plain-SQL
// baselines, and HTTP's ratio to each.
type LifecyclePoint struct {
	Batch             int     `json:"batch"`
	Pairs             int     `json:"pairs"`
	HTTPMsgsPerS      float64 `json:"http_msgs_per_s"`
	RawMsgsPerS       float64 `json:"raw_msgs_per_s"`
	Ratio             float64 `json:"ratio"` // HTTP ÷ raw
	PgmqShapeMsgsPerS float64 `json:"pgmq_shape_msgs_per_s"`
	PgmqShapeRatio    float64 `json:"pgmq_shape_ratio"` // HTTP ÷ pgmq_shape
	// Real pgmq, measured only with its install file (Options.PgmqSQL):
	// the keys are absent without it.
	PgmqMsgsPerS float64   `json:"pgmq_msgs_per_s,omitempty"`
	PgmqRatio    float64   `json:"pgmq_ratio,omitempty"` // HTTP ÷ pgmq
	HTTP         *RunStats `json:"http_stats,omitempty"`
	Raw          *RunStats `json:"raw_stats,omitempty"`
	PgmqShape    *RunStats `json:"pgmq_shape_stats,omitempty"`
	Pgmq         *RunStats `json:"pgmq_stats,omitempty"`
	// EmptyClaim is skipq's claim on the HTTP run's queue right after it
	// drained.
	EmptyClaim *Explain `json:"empty_claim,omitempty"`
}

// strongestBaseline names the fastest of the plain-SQL baselines measured
// and gives HTTP's ratio to it: the targets compare against it.
func (p LifecyclePoint) strongestBaseline() (string, float64) {
	name, rate, r := "raw SQL", p.RawMsgsPerS, p.Ratio
	if p.PgmqShapeMsgsPerS > rate {
		name, rate, r = "pgmq_shape", p.PgmqShapeMsgsPerS, p.PgmqShapeRatio
	}
	if p.PgmqMsgsPerS > rate {
		name, r = "real pgmq", p.PgmqRatio
	}
	return name, r
}

// writeLifecycle is the lifecycle section of the text report; real pgmq's
// columns only when it was measured.
func writeLifecycle(w io.Writer, ps []LifecyclePoint) {
	withPgmq := slices.ContainsFunc(ps, func(p LifecyclePoint) bool { return p.Pgmq != nil })
	fmt.Fprintf(w, "lifecycle (send → receive → ack), messages/s acked\n")
	fmt.Fprintf(w, "  %5s %5s  %10s %10s %8s %10s %10s", "batch", "pairs", "HTTP", "raw SQL", "HTTP/raw", "pgmq_shape", "HTTP/shape")
	if withPgmq {
		fmt.Fprintf(w, " %10s %9s", "real pgmq", "HTTP/pgmq")
	}
	fmt.Fprintf(w, "   %-26s %s\n", "CPU % bench/pg/other/idle", "top waits of busy backends (HTTP run)")
	for _, p := range ps {
		cpu, waits := "", ""
		if p.HTTP != nil {
			c := p.HTTP.CPU
			cpu = fmt.Sprintf("%.0f / %.0f / %.0f / %.0f", c.Bench, c.Postgres, c.Other, c.Idle+c.IOWait)
			waits = shares(p.HTTP.Waits, 3)
		}
		fmt.Fprintf(w, "  %5d %5d  %10s %10s %8.2f %10s %10.2f", p.Batch, p.Pairs,
			thousands(p.HTTPMsgsPerS), thousands(p.RawMsgsPerS), p.Ratio,
			thousands(p.PgmqShapeMsgsPerS), p.PgmqShapeRatio)
		if withPgmq {
			fmt.Fprintf(w, " %10s %9.2f", thousands(p.PgmqMsgsPerS), p.PgmqRatio)
		}
		fmt.Fprintf(w, "   %-26s %s\n", cpu, waits)
	}
	fmt.Fprintln(w)
	for _, p := range ps {
		for _, side := range []struct {
			name string
			rs   *RunStats
		}{{"HTTP", p.HTTP}, {"raw", p.Raw}, {"pgmq_shape", p.PgmqShape}, {"real pgmq", p.Pgmq}} {
			if side.rs == nil || len(side.rs.Statements) == 0 {
				continue
			}
			pm := side.rs.PerMessage
			fmt.Fprintf(w, "  batch %d × %d %s: %.0f commits/s, %.0f fsyncs/s, %.1f MB/s WAL; per message %.3f commits, %.3f fsyncs, %.0f bytes WAL, CPU %.0f µs bench process, %.0f µs PostgreSQL; statement time:",
				p.Batch, p.Pairs, side.name, side.rs.CommitsPerS, side.rs.FsyncsPerS, side.rs.WALMBPerS,
				pm.Commits, pm.Fsyncs, pm.WALBytes, side.rs.CPUPerMessage.Bench, side.rs.CPUPerMessage.Postgres)
			for i, st := range side.rs.Statements {
				if i == 4 {
					break
				}
				fmt.Fprintf(w, " %s %.0f%% (%.3f ms)", st.Name, st.Percent, st.MeanMS)
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w)
}
