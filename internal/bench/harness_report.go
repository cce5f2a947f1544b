package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Report is what a run measured. The JSON keys lifecycle, latency_ms,
// backlog, idle, heads and rss_mb_peak are the contract of `skipq-bench
// --json` (null for a scenario that did not run); the rest is evidence.
type Report struct {
	Lifecycle      []LifecyclePoint   `json:"lifecycle"`
	SQLConsumer    []SQLConsumerPoint `json:"sql_consumer,omitempty"`
	Latency        *LatencyResult     `json:"latency_ms"`
	SQS            *SQSResult         `json:"sqs,omitempty"`
	Backlog        *BacklogResult     `json:"backlog"`
	Idle           *IdleResult        `json:"idle"`
	Heads          *HeadsResult       `json:"heads"`
	FIFO           *FIFOResult        `json:"fifo,omitempty"`
	Search         *SearchResult      `json:"search,omitempty"`
	Trace          *TraceResult       `json:"trace,omitempty"`
	Locks          *LocksResult       `json:"locks,omitempty"`
	HeadsEvidence  *HeadsEvidence     `json:"heads_evidence,omitempty"`
	RSSMBPeak      float64            `json:"rss_mb_peak"`
	RSSScope       string             `json:"rss_scope"`
	RSSMBHighWater float64            `json:"rss_mb_high_water"`
	Setup          Setup              `json:"setup"`
	Targets        []Target           `json:"targets"`
	Warnings       []string           `json:"warnings"`
}

// Setup is what the figures were measured on.
type Setup struct {
	Postgres         string            `json:"postgres"`
	Settings         map[string]string `json:"settings"`
	CPUs             int               `json:"cpus"`
	Nodes            int               `json:"nodes"`
	External         bool              `json:"external_nodes"`
	DurationS        float64           `json:"duration_s"`
	WarmupS          float64           `json:"warmup_s"`
	Quick            bool              `json:"quick"`
	PgStatStatements bool              `json:"pg_stat_statements"`
}

// LifecyclePoint is one batch × pairs point: HTTP, raw SQL, and their ratio.
type LifecyclePoint struct {
	Batch        int       `json:"batch"`
	Pairs        int       `json:"pairs"`
	HTTPMsgsPerS float64   `json:"http_msgs_per_s"`
	RawMsgsPerS  float64   `json:"raw_msgs_per_s"`
	Ratio        float64   `json:"ratio"`
	HTTP         *RunStats `json:"http_stats,omitempty"`
	Raw          *RunStats `json:"raw_stats,omitempty"`
	// EmptyClaim is skipq's claim on the HTTP run's queue right after it
	// drained.
	EmptyClaim *Explain `json:"empty_claim,omitempty"`
}

// SQLConsumerPoint is one batch × pairs point of the lifecycle with SQL
// consumers (HTTP sends, skipq.receive, skipq.ack) next to the raw baseline.
type SQLConsumerPoint struct {
	Batch       int       `json:"batch"`
	Pairs       int       `json:"pairs"`
	SQLMsgsPerS float64   `json:"sql_msgs_per_s"`
	RawMsgsPerS float64   `json:"raw_msgs_per_s"`
	Ratio       float64   `json:"ratio"`
	SQL         *RunStats `json:"sql_stats,omitempty"`
	Raw         *RunStats `json:"raw_stats,omitempty"`
	// RawFromLifecycle: the raw figure is the lifecycle scenario's for the
	// point, measured earlier in the same run.
	RawFromLifecycle bool `json:"raw_from_lifecycle"`
}

// FIFOResult is the FIFO scenario (issue #13): FIFO lifecycle / standard
// lifecycle in the same run, the receive past a blocked group, the wake-up
// of a group's next message.
type FIFOResult struct {
	B1x16Ratio       float64     `json:"b1x16_ratio"`
	B100x4Ratio      float64     `json:"b100x4_ratio"`
	HOLP50MS         float64     `json:"hol_p50_ms"`
	HOLBuffers       int64       `json:"hol_buffers"`
	GroupWakeP50MS   float64     `json:"group_wake_p50_ms"`
	GroupWakeP99MS   float64     `json:"group_wake_p99_ms"`
	Groups           int         `json:"groups"` // active groups of the FIFO lifecycle
	Points           []FIFOPoint `json:"points"`
	HOLMessages      int         `json:"hol_messages"` // in the blocked group
	HOLExplain       *Explain    `json:"hol_explain"`
	GroupWakeSamples int         `json:"group_wake_samples"`
	GroupWakePath    string      `json:"group_wake_path"`
}

// SearchResult is the search scenario (SPEC §16.2): a page of 100 of
// GET /v1/messages per filter, in a tenant of Messages messages.
type SearchResult struct {
	Messages    int          `json:"messages"`
	Queues      int          `json:"queues"`
	FIFOQueues  int          `json:"fifo_queues"`
	Groups      int          `json:"groups_per_fifo_queue"`
	LoadSeconds float64      `json:"load_s"`
	Cases       []SearchCase `json:"cases"`
	ExplainNote string       `json:"explain_note,omitempty"` // why a case has no plans
	CPU         CPUShare     `json:"cpu"`
}

// SearchCase is one search's first page, timed over HTTP.
type SearchCase struct {
	Name       string            `json:"name"`
	Query      string            `json:"query"`
	Samples    int               `json:"samples"`
	P50MS      float64           `json:"p50_ms"`
	P99MS      float64           `json:"p99_ms"`
	MaxMS      float64           `json:"max_ms"`
	Items      int               `json:"items"`       // on the page
	NextCursor bool              `json:"next_cursor"` // the page had one
	Statements []SearchStatement `json:"statements"`  // what one page ran (auto_explain)
}

// SearchStatement is one statement a search page ran, with its plan
// (EXPLAIN ANALYZE, BUFFERS, by auto_explain).
type SearchStatement struct {
	Name       string   `json:"name"`
	DurationMS float64  `json:"duration_ms"`
	Plan       []string `json:"plan"`
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

// TraceResult is the trace scenario (SPEC §16.5): the HTTP lifecycle on
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

// FIFOPoint is one point of the FIFO lifecycle next to the standard one.
type FIFOPoint struct {
	Batch            int       `json:"batch"`
	Pairs            int       `json:"pairs"`
	StandardMsgsPerS float64   `json:"standard_msgs_per_s"`
	FIFOMsgsPerS     float64   `json:"fifo_msgs_per_s"`
	Ratio            float64   `json:"ratio"`
	Standard         *RunStats `json:"standard_stats,omitempty"`
	FIFO             *RunStats `json:"fifo_stats,omitempty"`
}

// RunStats is the evidence of one measured window.
type RunStats struct {
	Seconds        float64     `json:"seconds"`
	Acked          int64       `json:"acked"`
	CPU            CPUShare    `json:"cpu"`
	ActiveBackends float64     `json:"active_backends"` // average busy backends
	Waits          []Share     `json:"waits"`           // of busy backend samples
	CommitsPerS    float64     `json:"commits_per_s"`
	FsyncsPerS     float64     `json:"fsyncs_per_s"`
	WALMBPerS      float64     `json:"wal_mb_per_s"`
	StatementsPerS float64     `json:"statements_per_s"`
	Statements     []Statement `json:"statements"` // top by execution time
	// skipq.messages: vacuums (auto or not) that finished in the window,
	// and dead tuples at its end (pg_stat_user_tables, which lags ~1 s).
	Vacuums    int64 `json:"vacuums"`
	DeadTuples int64 `json:"dead_tuples"`
}

// CPUShare is the window's CPU in percent of the whole machine.
type CPUShare struct {
	Bench    float64 `json:"bench_process"` // nodes + load generators (in-process)
	Postgres float64 `json:"postgres"`
	Other    float64 `json:"other"`  // other processes (and server workers that exited within the window)
	Kernel   float64 `json:"kernel"` // irq and softirq (loopback networking)
	Steal    float64 `json:"steal"`  // taken by the hypervisor
	IOWait   float64 `json:"iowait"`
	Idle     float64 `json:"idle"`
}

// Share is a named percentage.
type Share struct {
	Name    string  `json:"name"`
	Percent float64 `json:"percent"`
}

// Statement is one statement's share of a window (pg_stat_statements).
type Statement struct {
	Name           string  `json:"name"`
	Calls          int64   `json:"calls"`
	CallsPerS      float64 `json:"calls_per_s"`
	TotalMS        float64 `json:"total_ms"`
	MeanMS         float64 `json:"mean_ms"`
	Percent        float64 `json:"percent"` // of the window's statement execution time
	RowsPerCall    float64 `json:"rows_per_call"`
	BuffersPerCall float64 `json:"buffers_per_call"`
}

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

// HeadsResult is SPEC §8's heads object, exactly its keys: the p50 of a
// send → receive → ack cycle on an empty queue, behind delayed_count delayed
// messages and behind in_flight_count in-flight ones, and the two ratios to
// the empty queue's p50. What backs the figures is in HeadsEvidence.
type HeadsResult struct {
	DelayedCount  int     `json:"delayed_count"`
	InFlightCount int     `json:"in_flight_count"`
	EmptyP50MS    float64 `json:"empty_p50_ms"`
	DelayedP50MS  float64 `json:"delayed_p50_ms"`
	InFlightP50MS float64 `json:"in_flight_p50_ms"`
	DelayedRatio  float64 `json:"delayed_ratio"`
	InFlightRatio float64 `json:"in_flight_ratio"`
}

// HeadsEvidence is how the heads figures were made: the fills, the rounds,
// each queue's distribution and one claim at each head.
type HeadsEvidence struct {
	DelayedFill   string       `json:"delayed_fill"`
	DelayedFillS  float64      `json:"delayed_fill_s"`
	InFlightFill  string       `json:"in_flight_fill"`
	InFlightFillS float64      `json:"in_flight_fill_s"`
	VacuumS       float64      `json:"vacuum_analyze_s"` // VACUUM ANALYZE skipq.messages (and CHECKPOINT) after the fills
	Warmup        int          `json:"warmup_cycles"`    // per queue, unmeasured
	Seconds       float64      `json:"seconds"`          // the measured rounds
	Queues        []HeadsQueue `json:"queues"`           // empty, delayed, in_flight
	CPU           CPUShare     `json:"cpu"`
}

// HeadsQueue is one queue's cycles, in ms.
type HeadsQueue struct {
	Queue   string   `json:"queue"` // empty, delayed or in_flight
	Ahead   int      `json:"ahead"` // messages ahead of the cycle's
	Samples int      `json:"samples"`
	P50     float64  `json:"p50_ms"`
	P90     float64  `json:"p90_ms"`
	P99     float64  `json:"p99_ms"`
	Max     float64  `json:"max_ms"`
	Claim   *Explain `json:"claim"` // skipq's claim of one message sent behind the head
}

// Explain summarizes one EXPLAIN (ANALYZE, BUFFERS) of skipq's claim.
type Explain struct {
	After         string   `json:"after"` // what ran before it
	MaxMessages   int      `json:"max_messages"`
	ExecutionMS   float64  `json:"execution_ms"`
	PlanningMS    float64  `json:"planning_ms"`
	SharedHit     int64    `json:"shared_hit"`
	SharedRead    int64    `json:"shared_read"`
	SharedDirtied int64    `json:"shared_dirtied"`
	Rows          int64    `json:"rows"`
	RoundTripMS   float64  `json:"round_trip_ms"` // the same claim, prepared, timed from Go just after
	Plan          []string `json:"plan"`
}

// IdleResult is the cost of waiting long-polls on one node.
type IdleResult struct {
	Waiters           int         `json:"waiters"`
	DBConnections     int         `json:"db_connections"`      // busy (state != idle), peak
	DBConnectionsOpen int         `json:"db_connections_open"` // every client connection, peak
	StatementsPerS    float64     `json:"statements_per_s"`
	StatementsSource  string      `json:"statements_source"`
	CommitsPerS       float64     `json:"commits_per_s"` // pg_stat_database; backends report it up to 10 s late
	Seconds           float64     `json:"seconds"`
	RSSMB             float64     `json:"rss_mb"`
	Statements        []Statement `json:"statements"`
	CPU               CPUShare    `json:"cpu"`
}

// Target is one SPEC §8 target and whether this run met it.
type Target struct {
	Name   string  `json:"name"`
	Want   string  `json:"want"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Met    bool    `json:"met"`
	Source string  `json:"source,omitempty"`
}

// pgmq 1.5.2 on this machine type (shared/POSTGRES-QUEUE-FACTS.md), the
// figures SPEC §8 compares against.
var pgmqReference = map[Point]float64{
	{1, 1}: 1119, {1, 4}: 2420, {1, 16}: 3899,
	{100, 1}: 54643, {100, 4}: 45542, {100, 16}: 40359,
}

// targets checks the report against SPEC §8.
func targets(r Report) []Target {
	var ts []Target
	add := func(name, want string, v float64, unit string, met bool, src string) {
		ts = append(ts, Target{name, want, v, unit, met, src})
	}
	for _, p := range r.Lifecycle {
		want := 0.4
		if p.Batch >= 100 {
			want = 0.5
		}
		add(fmt.Sprintf("lifecycle batch %d × %d: HTTP / raw SQL", p.Batch, p.Pairs),
			fmt.Sprintf("≥ %.2f", want), p.Ratio, "ratio", p.Ratio >= want, "")
		if ref, ok := pgmqReference[Point{p.Batch, p.Pairs}]; ok {
			add(fmt.Sprintf("lifecycle batch %d × %d: HTTP vs pgmq", p.Batch, p.Pairs),
				"≥ "+thousands(ref)+" msgs/s", p.HTTPMsgsPerS, "msgs/s", p.HTTPMsgsPerS >= ref,
				"pgmq 1.5.2 on this machine type, POSTGRES-QUEUE-FACTS.md")
		}
	}
	for _, p := range r.SQLConsumer {
		add(fmt.Sprintf("SQL consumer batch %d × %d: SQL API / raw SQL", p.Batch, p.Pairs),
			"≥ 0.90", p.Ratio, "ratio", p.Ratio >= 0.9, "the SQL consumer issue's target")
	}
	if l := r.Latency; l != nil {
		add("wake latency p50", "≤ 5 ms", l.P50, "ms", l.P50 <= 5, "")
		add("wake latency p99", "≤ 25 ms", l.P99, "ms", l.P99 <= 25, "")
	}
	if s := r.SQS; s != nil {
		for _, p := range s.Points {
			add(fmt.Sprintf("SQS batch %d × %d: aws-sdk-go-v2 / native HTTP", p.Batch, p.Pairs), "≥ 0.80", p.Ratio, "ratio", p.Ratio >= 0.8, "issue #15")
		}
		if w := s.Wake; w != nil {
			add("SQS long-poll wake latency p50", "≤ 5 ms", w.P50, "ms", w.P50 <= 5, "issue #15")
		}
	}
	if b := r.Backlog; b != nil {
		add(thousands(float64(b.Preloaded))+"-message backlog / empty queue", "≥ 0.90", b.Ratio, "ratio", b.Ratio >= 0.9, "")
		add("claim on an empty queue after a heavy run", "< 1 ms", b.EmptyClaimMS, "ms", b.EmptyClaimMS < 1, "")
	}
	if h := r.Heads; h != nil {
		add("cycle behind "+thousands(float64(h.DelayedCount))+" delayed / empty queue (p50)", "≤ 1.5", h.DelayedRatio, "ratio", h.DelayedRatio <= 1.5, "")
		add("cycle behind "+thousands(float64(h.InFlightCount))+" in flight / empty queue (p50)", "≤ 1.5", h.InFlightRatio, "ratio", h.InFlightRatio <= 1.5, "")
	}
	if i := r.Idle; i != nil {
		add(fmt.Sprintf("%d waiting long-polls: connections in use", i.Waiters), "≤ 10", float64(i.DBConnections), "connections", i.DBConnections <= 10, "")
		add(fmt.Sprintf("%d waiting long-polls: statements/s", i.Waiters), "≤ 5", i.StatementsPerS, "statements/s", i.StatementsPerS <= 5, i.StatementsSource)
	}
	if f := r.FIFO; f != nil {
		src := "issue #13"
		add("FIFO lifecycle batch 1 × 16 / standard", "≥ 0.70", f.B1x16Ratio, "ratio", f.B1x16Ratio >= 0.7, src)
		add("FIFO lifecycle batch 100 × 4 / standard", "≥ 0.50", f.B100x4Ratio, "ratio", f.B100x4Ratio >= 0.5, src)
		add(fmt.Sprintf("FIFO receive past a %s-message group in flight (p50)", thousands(float64(f.HOLMessages))),
			"≤ 10 ms", f.HOLP50MS, "ms", f.HOLP50MS <= 10, src)
		add("FIFO claim past that group", "≤ 200 buffers", float64(f.HOLBuffers), "buffers", f.HOLBuffers <= 200, src)
		add("FIFO group wake-up after the freeing ack p50", "≤ 10 ms", f.GroupWakeP50MS, "ms", f.GroupWakeP50MS <= 10, src)
		add("FIFO group wake-up after the freeing ack p99", "≤ 50 ms", f.GroupWakeP99MS, "ms", f.GroupWakeP99MS <= 50, src)
	}
	if tr := r.Trace; tr != nil {
		for _, p := range tr.Points {
			add(fmt.Sprintf("traced lifecycle batch %d × %d / untraced", p.Batch, p.Pairs),
				fmt.Sprintf("≥ %.2f", traceTarget), p.Ratio, "ratio", p.Ratio >= traceTarget, "SPEC §16.5")
		}
	}
	if l := r.Locks; l != nil {
		add("sends to other queues while a group and a key are held / nothing held", fmt.Sprintf("≥ %.2f", lockTargetRatio),
			l.Ratio, "ratio", l.Ratio >= lockTargetRatio, "issue 27")
		add("sends to other queues while a group and a key are held (p99)", fmt.Sprintf("≤ %d ms", lockTargetP99MS),
			l.Held.P99MS, "ms", l.Held.P99MS <= lockTargetP99MS, "issue 27")
	}
	if s := r.Search; s != nil {
		for _, c := range s.Cases {
			add(fmt.Sprintf("search page of 100 in %s messages, %s (p99)", thousands(float64(s.Messages)), c.Name),
				fmt.Sprintf("≤ %d ms", searchTargetMS), c.P99MS, "ms", c.P99MS <= searchTargetMS, "SPEC §16.2")
		}
	}
	if r.RSSMBPeak > 0 {
		add("peak RSS", "≤ 100 MB", r.RSSMBPeak, "MB", r.RSSMBPeak <= 100, r.RSSScope)
	}
	return ts
}

// WriteText writes the report as readable tables.
func (r Report) WriteText(w io.Writer) {
	s := r.Setup
	fmt.Fprintf(w, "skipq-bench: PostgreSQL %s (fsync=%s, synchronous_commit=%s, shared_buffers=%s), %d CPUs, %d node(s)%s\n",
		s.Postgres, s.Settings["fsync"], s.Settings["synchronous_commit"], s.Settings["shared_buffers"], s.CPUs, s.Nodes,
		map[bool]string{true: " (external)", false: " (in-process)"}[s.External])
	fmt.Fprintf(w, "each measured run: %.0f s after %.1f s of warm-up\n\n", s.DurationS, s.WarmupS)

	if len(r.Lifecycle) > 0 {
		fmt.Fprintf(w, "lifecycle (send → receive → ack), messages/s acked\n")
		fmt.Fprintf(w, "  %5s %5s  %10s %10s %8s   %-26s %s\n", "batch", "pairs", "HTTP", "raw SQL", "HTTP/raw", "CPU % bench/pg/other/idle", "top waits of busy backends (HTTP run)")
		for _, p := range r.Lifecycle {
			cpu, waits := "", ""
			if p.HTTP != nil {
				c := p.HTTP.CPU
				cpu = fmt.Sprintf("%.0f / %.0f / %.0f / %.0f", c.Bench, c.Postgres, c.Other, c.Idle+c.IOWait)
				waits = shares(p.HTTP.Waits, 3)
			}
			fmt.Fprintf(w, "  %5d %5d  %10s %10s %8.2f   %-26s %s\n", p.Batch, p.Pairs,
				thousands(p.HTTPMsgsPerS), thousands(p.RawMsgsPerS), p.Ratio, cpu, waits)
		}
		fmt.Fprintln(w)
		for _, p := range r.Lifecycle {
			for _, side := range []struct {
				name string
				rs   *RunStats
			}{{"HTTP", p.HTTP}, {"raw", p.Raw}} {
				if side.rs == nil || len(side.rs.Statements) == 0 {
					continue
				}
				fmt.Fprintf(w, "  batch %d × %d %s: %.0f commits/s, %.0f fsyncs/s, %.1f MB/s WAL; statement time:",
					p.Batch, p.Pairs, side.name, side.rs.CommitsPerS, side.rs.FsyncsPerS, side.rs.WALMBPerS)
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
	if len(r.SQLConsumer) > 0 {
		fmt.Fprintf(w, "SQL consumer (HTTP sends → skipq.receive → skipq.ack, each in autocommit), messages/s acked\n")
		fmt.Fprintf(w, "  %5s %5s  %10s %10s %8s   %s\n", "batch", "pairs", "SQL API", "raw SQL", "SQL/raw", "statement time (SQL API run)")
		for _, p := range r.SQLConsumer {
			stmts := ""
			if p.SQL != nil {
				for i, st := range p.SQL.Statements {
					if i == 3 {
						break
					}
					stmts += fmt.Sprintf(" %s %.0f%% (%.3f ms)", st.Name, st.Percent, st.MeanMS)
				}
			}
			raw := thousands(p.RawMsgsPerS)
			if p.RawFromLifecycle {
				raw += "*"
			}
			fmt.Fprintf(w, "  %5d %5d  %10s %10s %8.2f  %s\n", p.Batch, p.Pairs, thousands(p.SQLMsgsPerS), raw, p.Ratio, stmts)
		}
		fmt.Fprintf(w, "  (* the lifecycle scenario's raw figure for the point, earlier in this run)\n\n")
	}
	if l := r.Latency; l != nil {
		fmt.Fprintf(w, "wake latency (send answered → waiting receive answered, %s), %d samples:\n", l.Path, l.Samples)
		fmt.Fprintf(w, "  p50 %.2f ms   p90 %.2f ms   p99 %.2f ms   max %.2f ms   (send round trip p50 %.2f ms)\n\n",
			l.P50, l.P90, l.P99, l.Max, l.SendP50)
	}
	if f := r.FIFO; f != nil {
		fmt.Fprintf(w, "FIFO queues (%d active groups, maxMessagesPerGroup 1) next to the standard queue, messages/s acked:\n", f.Groups)
		for _, p := range f.Points {
			fmt.Fprintf(w, "  batch %3d × %2d pairs: standard %10s  FIFO %10s  FIFO/standard %.2f\n",
				p.Batch, p.Pairs, thousands(p.StandardMsgsPerS), thousands(p.FIFOMsgsPerS), p.Ratio)
		}
		fmt.Fprintf(w, "  receive past a %s-message group whose head is in flight: p50 %.2f ms; its claim read %d buffers\n",
			thousands(float64(f.HOLMessages)), f.HOLP50MS, f.HOLBuffers)
		if x := f.HOLExplain; x != nil {
			for _, line := range x.Plan {
				fmt.Fprintf(w, "    %s\n", line)
			}
		}
		fmt.Fprintf(w, "  group wake-up (freeing ack answered → waiting receive answered, %s), %d samples: p50 %.2f ms   p99 %.2f ms\n\n",
			f.GroupWakePath, f.GroupWakeSamples, f.GroupWakeP50MS, f.GroupWakeP99MS)
	}
	if tr := r.Trace; tr != nil {
		writeTrace(w, tr)
	}
	if l := r.Locks; l != nil {
		writeLocks(w, l)
	}
	if sq := r.SQS; sq != nil {
		fmt.Fprintf(w, "SQS (aws-sdk-go-v2) next to the native HTTP API, lifecycle messages/s acked\n")
		fmt.Fprintf(w, "  %5s %5s  %10s %10s %8s\n", "batch", "pairs", "SQS", "native", "SQS/nat")
		for _, p := range sq.Points {
			fmt.Fprintf(w, "  %5d %5d  %10s %10s %8.2f\n", p.Batch, p.Pairs, thousands(p.SQSMsgsPerS), thousands(p.HTTPMsgsPerS), p.Ratio)
		}
		if l := sq.Wake; l != nil {
			fmt.Fprintf(w, "  SQS long-poll wake latency, %d samples: p50 %.2f ms   p90 %.2f ms   p99 %.2f ms   (SendMessage p50 %.2f ms)\n",
				l.Samples, l.P50, l.P90, l.P99, l.SendP50)
		}
		fmt.Fprintln(w)
	}
	if i := r.Idle; i != nil {
		fmt.Fprintf(w, "idle: %d waiting long-polls on one node for %.0f s:\n", i.Waiters, i.Seconds)
		fmt.Fprintf(w, "  database connections in use %d (open %d), %.1f statements/s (%s), RSS %.0f MB\n",
			i.DBConnections, i.DBConnectionsOpen, i.StatementsPerS, i.StatementsSource, i.RSSMB)
		if len(i.Statements) > 0 {
			fmt.Fprintf(w, "  statements:")
			for _, st := range i.Statements {
				fmt.Fprintf(w, " %s %.1f/s", st.Name, st.CallsPerS)
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w)
	}
	if h := r.Heads; h != nil {
		writeHeads(w, h, r.HeadsEvidence)
	}
	if s := r.Search; s != nil {
		writeSearch(w, s)
	}
	if b := r.Backlog; b != nil {
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
	fmt.Fprintf(w, "memory: peak RSS %.1f MB (%s; VmHWM %.1f MB)\n\n", r.RSSMBPeak, r.RSSScope, r.RSSMBHighWater)
	for _, warning := range r.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", warning)
	}
	if len(r.Warnings) > 0 {
		fmt.Fprintln(w)
	}
	if len(r.Targets) > 0 {
		fmt.Fprintf(w, "SPEC §8 targets\n")
		for _, t := range r.Targets {
			mark := "met"
			if !t.Met {
				mark = "NOT met"
			}
			fmt.Fprintf(w, "  %-56s %-16s %12s  %s\n", t.Name, t.Want, trimFloat(t.Value)+" "+shortUnit(t.Unit), mark)
		}
	}
}

func writeHeads(w io.Writer, h *HeadsResult, ev *HeadsEvidence) {
	fmt.Fprintf(w, "heads: send → receive → ack cycle, one client, rounds interleaved over three queues\n")
	if ev == nil {
		fmt.Fprintf(w, "  p50 %.2f ms empty, %.2f ms behind %s delayed (%.2f), %.2f ms behind %s in flight (%.2f)\n\n",
			h.EmptyP50MS, h.DelayedP50MS, thousands(float64(h.DelayedCount)), h.DelayedRatio,
			h.InFlightP50MS, thousands(float64(h.InFlightCount)), h.InFlightRatio)
		return
	}
	fmt.Fprintf(w, "  %-10s %10s %8s %8s %8s %8s %7s  %s\n", "queue", "ahead", "cycles", "p50 ms", "p90 ms", "p99 ms", "ratio", "claim of one (EXPLAIN ANALYZE, skipq's plan)")
	for _, q := range ev.Queues {
		ratio := "-"
		switch q.Queue {
		case headDelayed:
			ratio = fmt.Sprintf("%.2f", h.DelayedRatio)
		case headInFlight:
			ratio = fmt.Sprintf("%.2f", h.InFlightRatio)
		}
		claim := ""
		if x := q.Claim; x != nil {
			claim = fmt.Sprintf("%.3f ms, %s buffers (%d hit + %d read)", x.ExecutionMS, thousands(float64(x.SharedHit+x.SharedRead)), x.SharedHit, x.SharedRead)
		}
		fmt.Fprintf(w, "  %-10s %10s %8d %8.2f %8.2f %8.2f %7s  %s\n", q.Queue, thousands(float64(q.Ahead)), q.Samples, q.P50, q.P90, q.P99, ratio, claim)
	}
	fmt.Fprintf(w, "  fills: %s delayed in %.1f s (%s); %s in flight in %.1f s (%s); VACUUM ANALYZE %.1f s\n\n",
		thousands(float64(h.DelayedCount)), ev.DelayedFillS, ev.DelayedFill, thousands(float64(h.InFlightCount)), ev.InFlightFillS, ev.InFlightFill, ev.VacuumS)
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

func writeSearch(w io.Writer, s *SearchResult) {
	fmt.Fprintf(w, "search: a page of 100 (GET /v1/messages) in a tenant of %s messages, %d queues (%d FIFO, %d groups each); load %.1f s\n",
		thousands(float64(s.Messages)), s.Queues, s.FIFOQueues, s.Groups, s.LoadSeconds)
	fmt.Fprintf(w, "  %-44s %8s %8s %8s %6s\n", "filter", "p50 ms", "p99 ms", "max ms", "items")
	for _, c := range s.Cases {
		cursor := ""
		if c.NextCursor {
			cursor = " + cursor"
		}
		fmt.Fprintf(w, "  %-44s %8.2f %8.2f %8.2f %6d%s\n", c.Name, c.P50MS, c.P99MS, c.MaxMS, c.Items, cursor)
	}
	if s.ExplainNote != "" {
		fmt.Fprintf(w, "  %s\n", s.ExplainNote)
	}
	for _, c := range s.Cases {
		fmt.Fprintf(w, "  plans of one page, %s (%s):\n", c.Name, c.Query)
		for _, st := range c.Statements {
			fmt.Fprintf(w, "    %.3f ms  %s\n", st.DurationMS, st.Name)
			for _, line := range st.Plan {
				fmt.Fprintf(w, "      %s\n", line)
			}
		}
	}
	fmt.Fprintln(w)
}

func shortUnit(u string) string {
	switch u {
	case "ratio":
		return ""
	case "connections":
		return "conns"
	case "statements/s":
		return "stmt/s"
	}
	return u
}

func trimFloat(v float64) string {
	switch {
	case v >= 1000 || v == math.Trunc(v):
		return thousands(v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func shares(ss []Share, n int) string {
	var parts []string
	for i, s := range ss {
		if i == n {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.0f%%", s.Name, s.Percent))
	}
	return strings.Join(parts, ", ")
}

// thousands formats v rounded, with thin grouping commas.
func thousands(v float64) string {
	n := int64(math.Round(v))
	neg := n < 0
	if neg {
		n = -n
	}
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}
