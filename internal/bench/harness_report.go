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
	KubeMQ         *KubeMQResult      `json:"kubemq,omitempty"`
	Backlog        *BacklogResult     `json:"backlog"`
	Idle           *IdleResult        `json:"idle"`
	Heads          *HeadsResult       `json:"heads"`
	FIFO           *FIFOResult        `json:"fifo,omitempty"`
	Search         *SearchResult      `json:"search,omitempty"`
	Trace          *TraceResult       `json:"trace,omitempty"`
	Locks          *LocksResult       `json:"locks,omitempty"`
	Fanout         *FanoutResult      `json:"fanout,omitempty"`
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
	ConsumerShape    ConsumerShape     `json:"consumer_shape"` // how consumers settle (Options.ConsumerShape)
	// PgmqFile is the install file of the lifecycle's real pgmq
	// baseline, when it ran (Options.PgmqSQL).
	PgmqFile *PgmqFile `json:"pgmq_file,omitempty"`
}

// Target is one performance target (docs/PERFORMANCE.md) and whether this
// run met it.
type Target struct {
	Name   string  `json:"name"`
	Want   string  `json:"want"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Met    bool    `json:"met"`
	Source string  `json:"source,omitempty"`
}

// pgmqReference is pgmq 1.5.2's lifecycle throughput in msgs/s on this
// machine type, published before the project started (docs/PERFORMANCE.md,
// "Comparison with published pgmq figures"): the "HTTP vs pgmq" targets.
var pgmqReference = map[Point]float64{
	{1, 1}: 1119, {1, 4}: 2420, {1, 16}: 3899,
	{100, 1}: 54643, {100, 4}: 45542, {100, 16}: 40359,
}

// targets checks the report against the performance targets
// (docs/PERFORMANCE.md).
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
		baseline, ratio := p.strongestBaseline()
		name := fmt.Sprintf("lifecycle batch %d × %d: HTTP / %s", p.Batch, p.Pairs, baseline)
		add(name, fmt.Sprintf("≥ %.2f", want), ratio, "ratio", ratio >= want, "the strongest of the baselines measured")
		add(name, "≥ 1.00", ratio, "ratio", ratio >= 1, "issue 29: at least as fast as pgmq over plain SQL")
		if ref, ok := pgmqReference[Point{p.Batch, p.Pairs}]; ok {
			add(fmt.Sprintf("lifecycle batch %d × %d: HTTP vs pgmq", p.Batch, p.Pairs),
				"≥ "+thousands(ref)+" msgs/s", p.HTTPMsgsPerS, "msgs/s", p.HTTPMsgsPerS >= ref,
				"pgmq 1.5.2 on this machine type, published figures")
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
	if k := r.KubeMQ; k != nil {
		for _, p := range k.Points {
			add(fmt.Sprintf("KubeMQ batch %d × %d: Upstream+Downstream / native HTTP", p.Batch, p.Pairs), "≥ 1.00", p.Ratio, "ratio", p.Ratio >= 1, "issue #30")
		}
		if k.Wake != nil {
			add("KubeMQ Downstream Get wake latency p50", "≤ 5 ms", k.WakeP50Ms, "ms", k.WakeP50Ms <= 5, "issue #30")
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
				fmt.Sprintf("≥ %.2f", traceTarget), p.Ratio, "ratio", p.Ratio >= traceTarget, "message history")
		}
	}
	if l := r.Locks; l != nil {
		add("sends to other queues while a group and a key are held / nothing held", fmt.Sprintf("≥ %.2f", lockTargetRatio),
			l.Ratio, "ratio", l.Ratio >= lockTargetRatio, "issue 27")
		add("sends to other queues while a group and a key are held (p99)", fmt.Sprintf("≤ %d ms", lockTargetP99MS),
			l.Held.P99MS, "ms", l.Held.P99MS <= lockTargetP99MS, "issue 27")
	}
	if f := r.Fanout; f != nil {
		src := "issue 31"
		add("publish to 10 subscriptions / sends, batch 1 × 16", fmt.Sprintf("≥ %.2f", fanoutPublishTarget),
			f.PublishRatioB1x16, "ratio", f.PublishRatioB1x16 >= fanoutPublishTarget, src)
		add("publish to 10 subscriptions / sends, batch 100 × 4", fmt.Sprintf("≥ %.2f", fanoutPublishTarget),
			f.PublishRatioB100x4, "ratio", f.PublishRatioB100x4 >= fanoutPublishTarget, src)
		add("slowest group's drain / a plain queue's", fmt.Sprintf("≥ %.2f", fanoutDrainTarget),
			f.DrainRatioMin, "ratio", f.DrainRatioMin >= fanoutDrainTarget, src)
		add("storage of a message published to 10 subscriptions / of a sent one", fmt.Sprintf("≤ %.0f", fanoutStorageTarget),
			f.StorageRatio, "ratio", f.StorageRatio <= fanoutStorageTarget, src)
		add("publish to 10 subscriptions wakes their receivers (p50)", fmt.Sprintf("≤ %.0f ms", fanoutWakeTarget),
			f.WakeP50MS, "ms", f.WakeP50MS <= fanoutWakeTarget, src)
		if r := f.Replay; r != nil {
			add(fmt.Sprintf("publish during a replay of %s retained messages / without", thousands(float64(r.Retained))),
				fmt.Sprintf("≥ %.2f", fanoutReplayTarget), r.Ratio, "ratio", r.Ratio >= fanoutReplayTarget, src)
		}
	}
	if s := r.Search; s != nil {
		for _, c := range s.Cases {
			add(fmt.Sprintf("search page of 100 in %s messages, %s (p99)", thousands(float64(s.Messages)), c.Name),
				fmt.Sprintf("≤ %d ms", searchTargetMS), c.P99MS, "ms", c.P99MS <= searchTargetMS, "search")
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
	fmt.Fprintf(w, "each measured run: %.0f s after %.1f s of warm-up\n", s.DurationS, s.WarmupS)
	switch s.ConsumerShape {
	case AckWithNextReceive:
		fmt.Fprintf(w, "consumers ack what they got with their next receive (HTTP) or read (plain SQL)\n")
	case AckSeparately:
		fmt.Fprintf(w, "consumers ack apart from their receives (--ack-in-receive=false)\n")
	}
	if f := s.PgmqFile; f != nil {
		fmt.Fprintf(w, "real pgmq installed from %s (sha256 %s)\n", f.Name, f.SHA256)
	}
	fmt.Fprintln(w)

	if len(r.Lifecycle) > 0 {
		writeLifecycle(w, r.Lifecycle)
	}
	if len(r.SQLConsumer) > 0 {
		writeSQLConsumer(w, r.SQLConsumer)
	}
	if l := r.Latency; l != nil {
		writeLatency(w, l)
	}
	if f := r.FIFO; f != nil {
		writeFIFO(w, f)
	}
	if tr := r.Trace; tr != nil {
		writeTrace(w, tr)
	}
	if l := r.Locks; l != nil {
		writeLocks(w, l)
	}
	if f := r.Fanout; f != nil {
		writeFanout(w, f)
	}
	if sq := r.SQS; sq != nil {
		writeSQS(w, sq)
	}
	if k := r.KubeMQ; k != nil {
		writeKubeMQ(w, k)
	}
	if i := r.Idle; i != nil {
		writeIdle(w, i)
	}
	if h := r.Heads; h != nil {
		writeHeads(w, h, r.HeadsEvidence)
	}
	if s := r.Search; s != nil {
		writeSearch(w, s)
	}
	if b := r.Backlog; b != nil {
		writeBacklog(w, b)
	}
	fmt.Fprintf(w, "memory: peak RSS %.1f MB (%s; VmHWM %.1f MB)\n\n", r.RSSMBPeak, r.RSSScope, r.RSSMBHighWater)
	for _, warning := range r.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", warning)
	}
	if len(r.Warnings) > 0 {
		fmt.Fprintln(w)
	}
	if len(r.Targets) > 0 {
		fmt.Fprintf(w, "Targets (docs/PERFORMANCE.md)\n")
		for _, t := range r.Targets {
			mark := "met"
			if !t.Met {
				mark = "NOT met"
			}
			fmt.Fprintf(w, "  %-56s %-16s %12s  %s\n", t.Name, t.Want, trimFloat(t.Value)+" "+shortUnit(t.Unit), mark)
		}
	}
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

// quantile of sorted values (nearest rank).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
