package bench_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skipq/skipq/internal/bench"
	"github.com/skipq/skipq/internal/testdb"
)

// TestRunShape runs a short lifecycle and latency bench against a test
// database and checks the JSON contract of `skipq-bench --json`: every key
// present, every figure positive. It asserts no speed: benchmarks are never
// timed tests (docs/PERFORMANCE.md).
func TestRunShape(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress io.Writer = io.Discard
	if testing.Verbose() {
		progress = os.Stderr
	}
	run := func() bench.Report {
		rep, err := bench.Run(ctx, bench.Options{
			DatabaseURL:    testdb.New(t),
			Scenarios:      []string{bench.Lifecycle, bench.Latency},
			Quick:          true,
			Duration:       2 * time.Second,
			Warmup:         500 * time.Millisecond,
			Matrix:         []bench.Point{{Batch: 1, Pairs: 2}, {Batch: 10, Pairs: 2}},
			LatencySamples: 50,
			Progress:       progress,
		})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rep := run()
	// A starved machine (every test package runs at once under make test)
	// can complete nothing in a short window; one more run tells that from
	// a bench that is broken.
	for _, p := range rep.Lifecycle {
		if p.HTTPMsgsPerS <= 0 || p.RawMsgsPerS <= 0 || p.PgmqShapeMsgsPerS <= 0 {
			t.Logf("a lifecycle point completed nothing (%+v); running once more", p)
			rep = run()
			break
		}
	}
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"lifecycle", "latency_ms", "backlog", "idle", "heads", "rss_mb_peak"} {
		if _, ok := got[k]; !ok {
			t.Errorf("key %q missing from %s", k, raw)
		}
	}
	if got["backlog"] != nil || got["idle"] != nil || got["heads"] != nil {
		t.Errorf("backlog, idle and heads did not run, want null: %v, %v, %v", got["backlog"], got["idle"], got["heads"])
	}
	positive := func(path string, v any) {
		t.Helper()
		if f, ok := v.(float64); !ok || f <= 0 {
			t.Errorf("%s = %v, want a positive number", path, v)
		}
	}
	points, _ := got["lifecycle"].([]any)
	if len(points) != 2 {
		t.Fatalf("lifecycle has %d points, want 2: %s", len(points), raw)
	}
	for _, p := range points {
		m, _ := p.(map[string]any)
		for _, k := range []string{"batch", "pairs", "http_msgs_per_s", "raw_msgs_per_s", "ratio", "pgmq_shape_msgs_per_s", "pgmq_shape_ratio"} {
			positive("lifecycle[]."+k, m[k])
		}
		// Real pgmq is measured only with its install file.
		for _, k := range []string{"pgmq_msgs_per_s", "pgmq_ratio", "pgmq_stats"} {
			if v, ok := m[k]; ok {
				t.Errorf("lifecycle[].%s = %v without pgmq's install file, want no such key", k, v)
			}
		}
		// What each message cost the database, on every side.
		for _, side := range []string{"http_stats", "raw_stats", "pgmq_shape_stats"} {
			stats, _ := m[side].(map[string]any)
			per, _ := stats["db_per_message"].(map[string]any)
			for _, k := range []string{"commits", "wal_bytes"} {
				positive("lifecycle[]."+side+".db_per_message."+k, per[k])
			}
		}
	}
	lat, _ := got["latency_ms"].(map[string]any)
	for _, k := range []string{"p50", "p90", "p99", "samples"} {
		positive("latency_ms."+k, lat[k])
	}
	if lat["samples"] != float64(50) {
		t.Errorf("latency_ms.samples = %v, want 50", lat["samples"])
	}
	positive("rss_mb_peak", got["rss_mb_peak"])
	// By default consumers ack with their next receive, as the Go
	// client's consumer loop does.
	if setup, _ := got["setup"].(map[string]any); setup["consumer_shape"] != string(bench.AckWithNextReceive) {
		t.Errorf("setup.consumer_shape = %v, want %s", setup["consumer_shape"], bench.AckWithNextReceive)
	}
	if testing.Verbose() {
		rep.WriteText(os.Stderr)
	}
}

// TestAckSeparatelyShape runs lifecycle points whose consumers ack apart
// from their receives (an ack request; a delete statement of its own for
// the plain-SQL baselines), the shape --ack-in-receive=false keeps: every
// side completes messages (a run fails on an ack that settled fewer than
// it carried), and the report says which shape ran. It asserts no speed.
func TestAckSeparatelyShape(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, bench.Options{
		DatabaseURL:   testdb.New(t),
		Scenarios:     []string{bench.Lifecycle},
		Duration:      time.Second,
		Warmup:        300 * time.Millisecond,
		Matrix:        []bench.Point{{Batch: 1, Pairs: 2}, {Batch: 10, Pairs: 2}},
		ConsumerShape: bench.AckSeparately,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Setup.ConsumerShape != bench.AckSeparately || len(rep.Lifecycle) != 2 {
		t.Fatalf("setup %+v, lifecycle %+v", rep.Setup, rep.Lifecycle)
	}
	for _, p := range rep.Lifecycle {
		if p.HTTPMsgsPerS <= 0 || p.RawMsgsPerS <= 0 || p.PgmqShapeMsgsPerS <= 0 {
			t.Errorf("a side completed nothing: %+v", p)
		}
	}
}

// TestRealPgmqBaseline runs lifecycle points with real pgmq as a third
// baseline (pgmq's install file, SKIPQ_TEST_PGMQ_SQL): every point
// measures it, the report names the file, and pgmq's database is gone
// afterwards. It asserts no speed.
func TestRealPgmqBaseline(t *testing.T) {
	path := os.Getenv("SKIPQ_TEST_PGMQ_SQL")
	if path == "" {
		t.Skip("real pgmq's tests need pgmq's SQL install file: SKIPQ_TEST_PGMQ_SQL=/path/to/pgmq.sql (docs/PERFORMANCE.md, Reproduce)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := testdb.New(t)
	rep, err := bench.Run(ctx, bench.Options{
		DatabaseURL: url,
		Scenarios:   []string{bench.Lifecycle},
		Duration:    time.Second,
		Warmup:      300 * time.Millisecond,
		Matrix:      []bench.Point{{Batch: 1, Pairs: 2}, {Batch: 10, Pairs: 2}},
		PgmqSQL:     path,
	})
	if err != nil {
		t.Fatal(err)
	}
	if f := rep.Setup.PgmqFile; f == nil || f.Name != filepath.Base(path) || len(f.SHA256) != 64 {
		t.Errorf("setup.pgmq_file = %+v, want %s and its sha256", f, filepath.Base(path))
	}
	for _, p := range rep.Lifecycle {
		if p.PgmqMsgsPerS <= 0 || p.PgmqRatio <= 0 || p.Pgmq == nil || p.Pgmq.PerMessage.Commits <= 0 {
			t.Errorf("real pgmq completed nothing, or its window went unwatched: %+v, stats %+v", p, p.Pgmq)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var left []string
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE 'skipq\_bench\_pgmq\_%'`)
	if err == nil {
		left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("pgmq's databases %v left behind", left)
	}
}

// TestHeadsShape runs the heads scenario at tiny sizes and checks the target's
// JSON object: exactly its keys, the counts asked for, positive figures,
// and ratios that are the p50s' quotients. It asserts no speed.
func TestHeadsShape(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress io.Writer = io.Discard
	if testing.Verbose() {
		progress = os.Stderr
	}
	rep, err := bench.Run(ctx, bench.Options{
		DatabaseURL:   testdb.New(t),
		Scenarios:     []string{bench.Heads},
		Quick:         true,
		HeadsDelayed:  2000,
		HeadsInFlight: 500,
		HeadsSamples:  20,
		Progress:      progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	heads, ok := got["heads"].(map[string]any)
	if !ok {
		t.Fatalf("heads = %v, want an object", got["heads"])
	}
	want := []string{"delayed_count", "in_flight_count", "empty_p50_ms", "delayed_p50_ms",
		"in_flight_p50_ms", "delayed_ratio", "in_flight_ratio"}
	for _, k := range want {
		if f, ok := heads[k].(float64); !ok || f <= 0 {
			t.Errorf("heads.%s = %v, want a positive number", k, heads[k])
		}
	}
	if len(heads) != len(want) {
		t.Errorf("heads has keys %v, want exactly %v", heads, want)
	}
	if heads["delayed_count"] != float64(2000) || heads["in_flight_count"] != float64(500) {
		t.Errorf("heads counts = %v, %v, want 2000, 500", heads["delayed_count"], heads["in_flight_count"])
	}
	h := rep.Heads
	for _, c := range []struct{ ratio, p50 float64 }{{h.DelayedRatio, h.DelayedP50MS}, {h.InFlightRatio, h.InFlightP50MS}} {
		if d := c.ratio - c.p50/h.EmptyP50MS; d > 0.01 || d < -0.01 {
			t.Errorf("ratio %v is not p50 %v / empty p50 %v", c.ratio, c.p50, h.EmptyP50MS)
		}
	}
	ev := rep.HeadsEvidence
	if ev == nil || len(ev.Queues) != 3 {
		t.Fatalf("heads evidence = %+v, want three queues", ev)
	}
	for _, q := range ev.Queues {
		if q.Samples != 20 || q.Claim == nil || q.Claim.Rows != 1 {
			t.Errorf("queue %s: %d samples, claim %+v; want 20 and a claim of one message", q.Queue, q.Samples, q.Claim)
		}
	}
	ratios := 0
	for _, tg := range rep.Targets {
		if tg.Unit == "ratio" {
			ratios++
		}
	}
	if ratios != 2 {
		t.Errorf("targets = %+v, want the two heads ratios", rep.Targets)
	}
	if testing.Verbose() {
		rep.WriteText(os.Stderr)
	}
}

// TestSQSShape runs a short sqs scenario and checks its JSON: both sides
// of each point and the wake latency measured, and the CPU of the node's
// process apart from the load generators'. No speed is asserted.
func TestSQSShape(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, bench.Options{
		DatabaseURL: testdb.New(t), Scenarios: []string{bench.SQS}, Quick: true,
		Duration: time.Second, Warmup: 200 * time.Millisecond, LatencySamples: 20,
		SQSMatrix: []bench.Point{{Batch: 1, Pairs: 2}, {Batch: 10, Pairs: 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(rep)
	var got struct {
		SQS struct {
			Points []struct {
				SQS    float64 `json:"sqs_msgs_per_s"`
				HTTP   float64 `json:"http_msgs_per_s"`
				SQSRun struct {
					CPU cpuPerMessage `json:"cpu_us_per_message"`
				} `json:"sqs_run"`
				HTTPRun struct {
					CPU cpuPerMessage `json:"cpu_us_per_message"`
				} `json:"http_run"`
			} `json:"points"`
			Wake struct {
				P50     float64 `json:"p50"`
				Samples int     `json:"samples"`
			} `json:"wake_ms"`
		} `json:"sqs"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.SQS.Points) != 2 || got.SQS.Wake.Samples != 20 || got.SQS.Wake.P50 <= 0 {
		t.Fatalf("sqs report: %s", raw)
	}
	for _, p := range got.SQS.Points {
		if p.SQS <= 0 || p.HTTP <= 0 {
			t.Fatalf("a point measured nothing: %s", raw)
		}
		for _, c := range []cpuPerMessage{p.SQSRun.CPU, p.HTTPRun.CPU} {
			if c.Nodes <= 0 || c.Bench <= 0 {
				t.Fatalf("a window's CPU is not split between the node's process and the load generators': %s", raw)
			}
		}
	}
}

// cpuPerMessage is a window's cpu_us_per_message.
type cpuPerMessage struct {
	Bench float64 `json:"bench_process"`
	Nodes float64 `json:"node_processes"`
}

// TestKubeMQShape runs a short kubemq scenario and checks its JSON: both
// sides of each point and the wake latency measured, and the CPU of the
// node's process apart from the load generators'. No speed is asserted.
func TestKubeMQShape(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, bench.Options{
		DatabaseURL: testdb.New(t), Scenarios: []string{bench.KubeMQ}, Quick: true,
		Duration: time.Second, Warmup: 200 * time.Millisecond, LatencySamples: 20,
		KubeMQMatrix: []bench.Point{{Batch: 1, Pairs: 16}, {Batch: 100, Pairs: 4}},
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(rep)
	var got struct {
		KubeMQ struct {
			B1x16Ratio  float64 `json:"b1x16_ratio"`
			B100x4Ratio float64 `json:"b100x4_ratio"`
			WakeP50Ms   float64 `json:"wake_p50_ms"`
			Points      []struct {
				KubeMQ    float64 `json:"kubemq_msgs_per_s"`
				HTTP      float64 `json:"http_msgs_per_s"`
				KubeMQRun struct {
					CPU cpuPerMessage `json:"cpu_us_per_message"`
				} `json:"kubemq_run"`
				HTTPRun struct {
					CPU cpuPerMessage `json:"cpu_us_per_message"`
				} `json:"http_run"`
			} `json:"points"`
		} `json:"kubemq"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	k := got.KubeMQ
	if len(k.Points) != 2 || k.B1x16Ratio <= 0 || k.B100x4Ratio <= 0 || k.WakeP50Ms <= 0 {
		t.Fatalf("kubemq report: %s", raw)
	}
	for _, p := range k.Points {
		if p.KubeMQ <= 0 || p.HTTP <= 0 {
			t.Fatalf("a point measured nothing: %s", raw)
		}
		for _, c := range []cpuPerMessage{p.KubeMQRun.CPU, p.HTTPRun.CPU} {
			if c.Nodes <= 0 || c.Bench <= 0 {
				t.Fatalf("a window's CPU is not split between the node's process and the load generators': %s", raw)
			}
		}
	}
}

// TestSearchShape runs a small search scenario: every case is timed and
// finds what it should, and where auto_explain could be loaded, the plans
// show the walk's indexes: a queue's by sentAt, a group's for groupId. No
// speed is asserted.
func TestSearchShape(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, bench.Options{
		DatabaseURL: testdb.New(t), Scenarios: []string{bench.Search}, Quick: true, Preload: 20000,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Search
	if s == nil || len(s.Cases) == 0 || s.Messages != 20000 {
		t.Fatalf("search report: %+v", s)
	}
	for _, c := range s.Cases {
		if c.Samples == 0 || c.P50MS <= 0 || c.P99MS < c.P50MS {
			t.Errorf("%s: %+v", c.Name, c)
		}
		want := 100
		switch c.Name {
		case "messageId":
			want = 1
		case "state=acked (none)":
			want = 0
		case "groupId": // 20,000 messages hold fewer than 100 of a group
			want = c.Items
		case "queuePrefix (1,000 queues), limit=1000":
			want = 1000
		}
		if c.Items != want || (c.Name == "groupId" && c.Items == 0) {
			t.Errorf("%s: %d messages on the page, want %d", c.Name, c.Items, want)
		}
		// 200 messages a queue fill each queue's share of the walk's
		// budget: an empty page that goes on.
		if c.Name == "state=acked (none)" && !c.NextCursor {
			t.Errorf("%s: no cursor after the budget ran out", c.Name)
		}
		if s.ExplainNote != "" {
			continue
		}
		plans := ""
		for _, st := range c.Statements {
			plans += st.Name + "\n" + strings.Join(st.Plan, "\n") + "\n"
		}
		index := "messages_queue_sent_idx"
		switch {
		case strings.HasPrefix(c.Name, "groupId"):
			index = "messages_group_idx"
		case c.Name == "messageId":
			index = "messages_message_id_queue_key"
		}
		if !strings.Contains(plans, "Index Scan using "+index) || strings.Contains(plans, "Seq Scan on messages") {
			t.Errorf("%s: the plans do not walk %s:\n%s", c.Name, index, plans)
		}
	}
	n := 0
	for _, tg := range rep.Targets {
		if strings.HasPrefix(tg.Name, "search page") {
			n++
		}
	}
	if n != len(s.Cases) {
		t.Errorf("%d search targets for %d cases", n, len(s.Cases))
	}
}

// TestTraceShape runs a short trace scenario: both points, each with its
// runs in the order untraced, traced, traced, untraced, the ratio made of
// their means, a target per point, and more than one history row per
// message of the traced queues. No speed is asserted.
func TestTraceShape(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, bench.Options{
		DatabaseURL: testdb.New(t), Scenarios: []string{bench.Trace}, Quick: true,
		Duration: time.Second, Warmup: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	tr := rep.Trace
	if tr == nil || len(tr.Points) != 2 {
		t.Fatalf("trace report: %+v", tr)
	}
	for _, p := range tr.Points {
		var order []bool
		var sum [2]float64
		for _, r := range p.Runs {
			order = append(order, r.Traced)
			if r.Traced {
				sum[1] += r.MsgsPerS
			} else {
				sum[0] += r.MsgsPerS
			}
		}
		if !slices.Equal(order, []bool{false, true, true, false}) {
			t.Errorf("batch %d: runs traced %v, want untraced, traced, traced, untraced", p.Batch, order)
		}
		if p.UntracedMsgsPerS <= 0 || p.TracedMsgsPerS <= 0 {
			t.Fatalf("batch %d measured nothing: %+v", p.Batch, p)
		}
		if d := p.UntracedMsgsPerS - sum[0]/2; d > 1 || d < -1 {
			t.Errorf("batch %d: untraced %v is not the mean of its runs %v", p.Batch, p.UntracedMsgsPerS, sum[0]/2)
		}
		if d := p.Ratio - p.TracedMsgsPerS/p.UntracedMsgsPerS; d > 0.01 || d < -0.01 {
			t.Errorf("batch %d: ratio %v is not traced / untraced", p.Batch, p.Ratio)
		}
		// Each message has its sent event, and the traced runs acked some:
		// their received and acked events make more than one a message.
		if p.EventsPerMessage == nil || *p.EventsPerMessage <= 1 {
			t.Errorf("batch %d: history rows per message %v (%s), want more than 1", p.Batch, p.EventsPerMessage, tr.EventsNote)
		}
	}
	if n := targetsNamed(rep, "traced lifecycle"); n != 2 {
		t.Errorf("targets = %+v, want one per trace point", rep.Targets)
	}
}

// TestLocksShape runs a short locks scenario: both windows measured, the
// sends to the held group and key all still waiting when the window ends,
// and both targets reported. No speed is asserted.
func TestLocksShape(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, bench.Options{
		DatabaseURL: testdb.New(t), Scenarios: []string{bench.Locks}, Quick: true, Duration: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	l := rep.Locks
	if l == nil || l.Free.Sent == 0 || l.Held.Sent == 0 {
		t.Fatalf("locks report: %+v", l)
	}
	if l.WaitersAnsweredWhileHeld != 0 {
		t.Errorf("%d sends to the held group or key were answered while it was held", l.WaitersAnsweredWhileHeld)
	}
	if n := targetsNamed(rep, "held"); n != 2 {
		t.Errorf("targets = %+v, want the ratio and the p99", rep.Targets)
	}
}

// targetsNamed counts the report's targets whose name contains part.
func targetsNamed(rep bench.Report, part string) int {
	n := 0
	for _, tg := range rep.Targets {
		if strings.Contains(tg.Name, part) {
			n++
		}
	}
	return n
}

// TestFanoutShape runs a short fanout scenario: both points with each
// subscription count measured, the storage ratio, the wake-up and the
// publishes during a replay (of 20,000 retained messages) measured, and the
// six targets reported. No speed is asserted.
func TestFanoutShape(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, bench.Options{
		DatabaseURL: testdb.New(t), Scenarios: []string{bench.Fanout}, Quick: true,
		Duration: 500 * time.Millisecond, Warmup: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	f := rep.Fanout
	if f == nil || len(f.Points) != 2 {
		t.Fatalf("fanout report: %+v", f)
	}
	for _, p := range f.Points {
		if len(p.Subs) != 2 || p.SendMsgsPerS <= 0 || p.Subs[1].PublishMsgsPerS <= 0 || p.Subs[1].Subscriptions != 10 {
			t.Errorf("batch %d: %+v", p.Batch, p)
		}
		// Each drain's CPU time a message, by who spent it (the server
		// runs on this machine, the nodes in the bench process).
		for _, s := range p.Subs {
			for side, c := range map[string]*bench.DrainCPU{"group": s.GroupDrainCPU, "plain": s.PlainDrainCPU} {
				if c == nil || c.BenchUS <= 0 || c.PostgresUS <= 0 {
					t.Errorf("batch %d, %d subscriptions: the %s drain's CPU %+v, want the bench process's and the server's", p.Batch, s.Subscriptions, side, c)
				}
			}
		}
	}
	if f.StorageRatio <= 0 || f.WakeP50MS <= 0 {
		t.Errorf("storage ratio %v, wake p50 %v ms: want both measured", f.StorageRatio, f.WakeP50MS)
	}
	// Measured where inserts cannot reuse what earlier deletes freed: a
	// sent message, and a published one (its body stored once, its copies
	// pending), takes at least its 1 KiB body.
	if f.StorageSendBytes < 1024 || f.StoragePublishBytes < 1024 || !strings.Contains(f.StorageNote, "fresh database") {
		t.Errorf("storage: %v bytes a sent message, %v a published one (%s); want them written into a fresh database, at least the body each",
			f.StorageSendBytes, f.StoragePublishBytes, f.StorageNote)
	}
	// The window starts once the replay sent its first copies; in a window
	// this short it may send no more (it rests between steps).
	if r := f.Replay; r == nil || r.PublishMsgsPerS <= 0 || r.DuringReplayMsgsPerS <= 0 || r.ReplayedMsgsPerS < 0 {
		t.Errorf("replay: %+v, want publishes without and during it measured", r)
	}
	if n := targetsNamed(rep, "publish during a replay"); n != 1 {
		t.Errorf("targets = %+v, want the replay's", rep.Targets)
	}
	if n := targetsNamed(rep, "publish to 10"); n != 3 {
		t.Errorf("targets = %+v, want the fanout ones", rep.Targets)
	}
}
