package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// tracePoints are the points the trace target names (docs/PERFORMANCE.md).
var tracePoints = []Point{{Batch: 1, Pairs: 16}, {Batch: 100, Pairs: 4}}

// traceOrder is the order of a point's runs, traced or not: untraced,
// traced, traced, untraced. Drift over a point (autovacuum, the events
// table growing, other load coming or going) then falls on both sides
// alike, and neither side always runs first on fresh nodes.
var traceOrder = []bool{false, true, true, false}

// traceTarget is the trace target's floor for traced / untraced msgs/s (docs/PERFORMANCE.md).
const traceTarget = 0.6

// trace measures what message history costs (docs/API.md#history): the HTTP
// lifecycle on traced queues next to untraced ones at the same points, in
// the order of traceOrder, each run on a fresh queue with the same
// warm-up, window and drain, and the history rows the traced runs wrote
// per message.
func (e *env) trace(ctx context.Context) (*TraceResult, error) {
	ns, err := e.startNodes(ctx)
	if err != nil {
		return nil, err
	}
	defer ns.stop()
	res := &TraceResult{}
	for _, p := range tracePoints {
		tp := TracePoint{Batch: p.Batch, Pairs: p.Pairs}
		var sum, runs [2]float64 // by traced
		var rows, messages int64
		counted := true
		for i, traced := range traceOrder {
			kind, settings := "untraced", ""
			if traced {
				kind, settings = "traced", `{"trace":true}`
			}
			q := queueName(fmt.Sprintf("trace-%s-b%d-p%d", kind, p.Batch, p.Pairs))
			if err := e.http.createQueue(ctx, ns.at(0), q, settings); err != nil {
				return res, err
			}
			e.checkpoint(ctx)
			e.logf("trace: %s lifecycle batch %d × %d pairs over HTTP (run %d of %d)", kind, p.Batch, p.Pairs, i+1, len(traceOrder))
			rate, stats, err := e.drive(ctx, newHTTPWorkload(e.http, ns, q, p, e.o.ConsumerShape), p, nil)
			if err != nil {
				return res, fmt.Errorf("%s batch %d × %d: %w", kind, p.Batch, p.Pairs, err)
			}
			// Counted before the leftovers go, so only what the lifecycle
			// wrote is counted.
			if traced && counted {
				n, m, note, err := e.historyRows(ctx, q)
				if err != nil {
					return res, err
				}
				if note != "" {
					counted, res.EventsNote = false, note
				}
				rows, messages = rows+n, messages+m
			}
			if err := e.deleteLeftovers(ctx, q); err != nil {
				return res, err
			}
			side := 0
			if traced {
				side = 1
			}
			sum[side] += rate
			runs[side]++
			tp.Runs = append(tp.Runs, TraceRun{Traced: traced, MsgsPerS: round(rate, 0), Stats: stats})
		}
		tp.UntracedMsgsPerS, tp.TracedMsgsPerS = round(sum[0]/runs[0], 0), round(sum[1]/runs[1], 0)
		if tp.UntracedMsgsPerS > 0 {
			tp.Ratio = round(tp.TracedMsgsPerS/tp.UntracedMsgsPerS, 3)
		}
		if counted && messages > 0 {
			v := round(float64(rows)/float64(messages), 2)
			tp.EventsPerMessage = &v
		}
		e.logf("  untraced %.0f msgs/s, traced %.0f msgs/s, ratio %.2f, %s history rows per message",
			tp.UntracedMsgsPerS, tp.TracedMsgsPerS, tp.Ratio, eventsPerMessage(tp.EventsPerMessage))
		res.Points = append(res.Points, tp)
	}
	return res, nil
}

// historyRows counts the rows of skipq.message_events of queue and the
// messages they are of: each message sent to a traced queue has its sent
// event, so that is every message the queue got, whether or not its
// sender saw the answer before the run ended. A database without that
// table (history not yet built, or an older one under --url) answers a
// note instead of counts.
func (e *env) historyRows(ctx context.Context, queue string) (rows, messages int64, note string, err error) {
	var exists bool
	if err := e.mon.QueryRow(ctx, monitorMark+"SELECT to_regclass('skipq.message_events') IS NOT NULL").Scan(&exists); err != nil {
		return 0, 0, "", fmt.Errorf("trace: history table: %w", err)
	}
	if !exists {
		return 0, 0, "the database has no skipq.message_events", nil
	}
	err = e.mon.QueryRow(ctx, monitorMark+`SELECT count(*), count(DISTINCT message_id) FROM skipq.message_events
WHERE queue_id = (SELECT id FROM skipq.queues WHERE name = $1)`, queue).Scan(&rows, &messages)
	if err != nil {
		return 0, 0, "", fmt.Errorf("trace: count history rows of %s: %w", queue, err)
	}
	return rows, messages, "", nil
}

func eventsPerMessage(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", *v)
}

// TraceResult is the trace scenario (docs/API.md#history): the HTTP lifecycle on
// traced queues next to untraced ones in the same run.
type TraceResult struct {
	Points     []TracePoint `json:"points"`
	EventsNote string       `json:"events_note,omitempty"` // why events_per_message is null
}

// TracePoint is one batch × pairs point: the mean of its untraced runs and
// of its traced runs, their ratio, and the history rows the traced runs
// wrote per message (null when they could not be counted).
type TracePoint struct {
	Batch            int        `json:"batch"`
	Pairs            int        `json:"pairs"`
	UntracedMsgsPerS float64    `json:"untraced_msgs_per_s"`
	TracedMsgsPerS   float64    `json:"traced_msgs_per_s"`
	Ratio            float64    `json:"ratio"`
	EventsPerMessage *float64   `json:"events_per_message"`
	Runs             []TraceRun `json:"runs"` // in the order they ran
}

// TraceRun is one measured run of a trace point.
type TraceRun struct {
	Traced   bool      `json:"traced"`
	MsgsPerS float64   `json:"msgs_per_s"`
	Stats    *RunStats `json:"stats,omitempty"`
}

func writeTrace(w io.Writer, tr *TraceResult) {
	fmt.Fprintf(w, "trace: lifecycle over HTTP on traced queues next to untraced ones, messages/s acked (runs in order)\n")
	fmt.Fprintf(w, "  %5s %5s  %10s %10s %8s  %12s  %s\n", "batch", "pairs", "untraced", "traced", "tr/untr", "history/msg", "runs (u untraced, t traced)")
	for _, p := range tr.Points {
		var runs []string
		for _, r := range p.Runs {
			side := "u"
			if r.Traced {
				side = "t"
			}
			runs = append(runs, side+" "+thousands(r.MsgsPerS))
		}
		fmt.Fprintf(w, "  %5d %5d  %10s %10s %8.2f  %12s  %s\n", p.Batch, p.Pairs, thousands(p.UntracedMsgsPerS),
			thousands(p.TracedMsgsPerS), p.Ratio, eventsPerMessage(p.EventsPerMessage), strings.Join(runs, ", "))
	}
	if tr.EventsNote != "" {
		fmt.Fprintf(w, "  history rows per message n/a: %s\n", tr.EventsNote)
	}
	fmt.Fprintln(w)
}
