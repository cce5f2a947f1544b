package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Scenario names, in the order they run. The two that fill large queues run
// last: heads removes its fills when the backlog runs after it, and the
// backlog leaves a large table behind.
const (
	Lifecycle   = "lifecycle"
	SQLConsumer = "sqlconsumer"
	Latency     = "latency"
	SQS         = "sqs"
	KubeMQ      = "kubemq"
	Idle        = "idle"
	Heads       = "heads"
	Backlog     = "backlog"
	FIFO        = "fifo"
	Search      = "search"
	Trace       = "trace"
	Locks       = "locks"
	Fanout      = "fanout"
)

// Scenarios is every scenario, in run order.
// Idle runs first, on the fresh database: after the other scenarios the
// worker still fires the lease timers of their claims for a minute (most of
// them hints of messages already acked), which is work, not idleness.
// Trace runs before the scenarios that fill large queues, so its untraced
// figures compare with the lifecycle's. FIFO fills one group with a million
// messages. Search runs last: it adds
// a million messages of a tenant of its own, which it reads, never claims.
var Scenarios = []string{Idle, Lifecycle, SQLConsumer, Latency, SQS, KubeMQ, Trace, Locks, Fanout, Heads, Backlog, FIFO, Search}

// Point is one lifecycle measurement: messages per send/receive/ack call and
// producer/consumer pairs.
type Point struct {
	Batch int `json:"batch"`
	Pairs int `json:"pairs"`
}

// ConsumerShape is how a lifecycle's consumers settle the messages they
// got.
type ConsumerShape string

const (
	// AckWithNextReceive is the Go client's consumer loop (client.Consume):
	// a consumer's next receive carries the acks of what it got ("ack" of
	// the receive: one request and one commit for both), answering at once
	// when it carries any. The plain-SQL yardsticks do the same: one
	// statement deletes what was read and reads the next batch.
	AckWithNextReceive ConsumerShape = "ack_with_next_receive"
	// AckSeparately is receive, then an ack request (a delete statement for
	// the yardsticks): three requests a message over HTTP with the send.
	AckSeparately ConsumerShape = "ack_separately"
)

// Default figures. A full default run is about 2.5 minutes on 2 cores: the
// 6-point lifecycle matrix runs HTTP and raw SQL for 1 s warm-up + 5 s each
// (~80 s with drains), the backlog preloads 1,000,000 rows and runs twice,
// the idle scenario holds 1,000 long-polls for 10 s. The heads scenario adds
// about 3 minutes while a claim walks past what sits ahead of it: fills of
// 1,000,000 delayed and 100,000 in-flight messages, then its cycles (see
// heads.go for its own figures).
const (
	DefaultDuration      = 5 * time.Second
	QuickDuration        = 3 * time.Second
	DefaultWarmup        = time.Second
	QuickWarmup          = 500 * time.Millisecond
	DefaultPreload       = 1_000_000
	QuickPreload         = 100_000
	DefaultSamples       = 1000
	QuickSamples         = 200
	DefaultIdleWaiters   = 1000
	DefaultIdleDuration  = 10 * time.Second
	QuickIdleDuration    = 3 * time.Second
	DefaultClusterDir    = ".skipq/bench"
	defaultMaxPerRequest = 1000 // docs/API.md: a batch send holds at most 1,000 messages
)

// DefaultMatrix is batch 1 and 100 by 1, 4 and 16 pairs; QuickMatrix keeps
// the 4-pair column.
var (
	DefaultMatrix = []Point{{1, 1}, {1, 4}, {1, 16}, {100, 1}, {100, 4}, {100, 16}}
	QuickMatrix   = []Point{{1, 4}, {100, 4}}
)

// Options configure a run. Zero values take the defaults above.
type Options struct {
	Scenarios []string      // a subset of Scenarios; empty = all
	Quick     bool          // CI smoke run: shorter runs, smaller preload and matrix
	Duration  time.Duration // each measured run
	Warmup    time.Duration // load before each measured run

	URLs        []string // running nodes to drive (needs DatabaseURL); empty = in-process nodes
	DatabaseURL string   // an existing, migrated database; empty = a fresh one on the private cluster
	Nodes       int      // in-process nodes (default 1); pairs and receivers spread over them
	APIKey      string   // Authorization: Bearer for URLs with auth on

	Matrix         []Point       // lifecycle points
	SQSMatrix      []Point       // sqs scenario points (default SQSMatrix)
	KubeMQMatrix   []Point       // kubemq scenario points (default KubeMQMatrix)
	LatencySamples int           // wake-latency samples
	Preload        int           // backlog size
	IdleWaiters    int           // concurrent long-polls of the idle scenario
	IdleDuration   time.Duration // how long they are watched
	HeadsDelayed   int           // delayed messages ahead of the heads cycle
	HeadsInFlight  int           // in-flight messages ahead of the heads cycle
	HeadsSamples   int           // measured heads cycles per queue
	ReplayRetained int           // retained messages the fanout scenario's replay goes through

	// ConsumerShape is how consumers settle what they got: the lifecycle's
	// HTTP ones and its plain-SQL yardsticks, and the HTTP consumers of the
	// scenarios that compare skipq with itself (fifo, trace, backlog).
	// Empty: AckWithNextReceive.
	ConsumerShape ConsumerShape

	// PgmqSQL is the path of pgmq's SQL install file (from a pgmq
	// release; the project ships none of pgmq): with it the lifecycle
	// scenario installs pgmq in a database of its own on the bench's
	// cluster and measures real pgmq at every point as a third baseline.
	PgmqSQL string

	ClusterDir string    // the private cluster's home (default .skipq/bench)
	CPUProfile io.Writer // CPU profile of the HTTP window of the batch-1 lifecycle point with the most pairs (none: the first point)
	// CPUProfileNative, with the sqs scenario but not the lifecycle one:
	// the node's profile of the native HTTP window beside the SQS window
	// that CPUProfile profiles.
	CPUProfileNative io.Writer
	Progress         io.Writer // one line per step; nil = quiet
}

func (o Options) withDefaults() (Options, error) {
	pick := func(d *time.Duration, def, quick time.Duration) {
		if *d <= 0 {
			*d = def
			if o.Quick {
				*d = quick
			}
		}
	}
	pick(&o.Duration, DefaultDuration, QuickDuration)
	pick(&o.Warmup, DefaultWarmup, QuickWarmup)
	pick(&o.IdleDuration, DefaultIdleDuration, QuickIdleDuration)
	if o.Nodes <= 0 {
		o.Nodes = 1
	}
	if len(o.URLs) > 0 {
		o.Nodes = len(o.URLs)
	}
	if o.Matrix == nil {
		o.Matrix = DefaultMatrix
		if o.Quick {
			o.Matrix = QuickMatrix
		}
	}
	switch o.ConsumerShape {
	case "":
		o.ConsumerShape = AckWithNextReceive
	case AckWithNextReceive, AckSeparately:
	default:
		return o, fmt.Errorf("bench: unknown consumer shape %q (want %s or %s)", o.ConsumerShape, AckWithNextReceive, AckSeparately)
	}
	if o.SQSMatrix == nil {
		o.SQSMatrix = SQSMatrix
	}
	if o.KubeMQMatrix == nil {
		o.KubeMQMatrix = KubeMQMatrix
	}
	for _, p := range o.SQSMatrix {
		if p.Batch < 1 || p.Batch > 10 || p.Pairs < 1 {
			return o, fmt.Errorf("bench: bad sqs point %+v (SQS batches hold 1 to 10 messages)", p)
		}
	}
	for _, p := range o.Matrix {
		if p.Batch < 1 || p.Batch > defaultMaxPerRequest || p.Pairs < 1 {
			return o, fmt.Errorf("bench: bad lifecycle point %+v", p)
		}
	}
	if o.LatencySamples <= 0 {
		o.LatencySamples = DefaultSamples
		if o.Quick {
			o.LatencySamples = QuickSamples
		}
	}
	if o.Preload <= 0 {
		o.Preload = DefaultPreload
		if o.Quick {
			o.Preload = QuickPreload
		}
	}
	pickN := func(n *int, def, quick int) {
		if *n <= 0 {
			*n = def
			if o.Quick {
				*n = quick
			}
		}
	}
	pickN(&o.HeadsDelayed, DefaultHeadsDelayed, QuickHeadsDelayed)
	pickN(&o.HeadsInFlight, DefaultHeadsInFlight, QuickHeadsInFlight)
	pickN(&o.HeadsSamples, DefaultHeadsSamples, QuickHeadsSamples)
	pickN(&o.ReplayRetained, fanoutReplayRetained, fanoutReplayQuick)
	if o.IdleWaiters <= 0 {
		o.IdleWaiters = DefaultIdleWaiters
	}
	if o.ClusterDir == "" {
		o.ClusterDir = DefaultClusterDir
	}
	if len(o.Scenarios) == 0 {
		o.Scenarios = Scenarios
	}
	for _, s := range o.Scenarios {
		if !slices.Contains(Scenarios, s) {
			return o, fmt.Errorf("bench: unknown scenario %q (want %s)", s, strings.Join(Scenarios, ", "))
		}
	}
	if o.PgmqSQL != "" && !o.runs(Lifecycle) {
		return o, errors.New("bench: pgmq's install file is for the lifecycle scenario, which is not to run")
	}
	if len(o.URLs) > 0 && o.DatabaseURL == "" {
		return o, errors.New("bench: running nodes (URLs) need the database they use (DatabaseURL)")
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o, nil
}

func (o Options) runs(s string) bool { return slices.Contains(o.Scenarios, s) }

// Run runs the chosen scenarios and reports what they measured.
func Run(ctx context.Context, opts Options) (Report, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return Report{}, err
	}
	e, err := newEnv(ctx, o)
	if err != nil {
		return Report{}, err
	}
	defer e.close()

	rep := Report{Setup: e.setup(ctx)}
	rss := startRSSSampler()
	defer rss.stop()
	e.rss = rss

	for _, sc := range Scenarios {
		if !o.runs(sc) {
			continue
		}
		e.scenario = sc
		switch sc {
		case Lifecycle:
			rep.Lifecycle, err = e.lifecycle(ctx)
		case SQLConsumer:
			rep.SQLConsumer, err = e.sqlConsumer(ctx, rep.Lifecycle)
		case Latency:
			rep.Latency, err = e.latency(ctx)
		case SQS:
			rep.SQS, err = e.sqsScenario(ctx)
		case KubeMQ:
			rep.KubeMQ, err = e.kubemqScenario(ctx)
		case Idle:
			rep.Idle, err = e.idle(ctx)
		case Heads:
			rep.Heads, rep.HeadsEvidence, err = e.heads(ctx)
		case Backlog:
			rep.Backlog, err = e.backlog(ctx, rep.Lifecycle)
		case FIFO:
			rep.FIFO, err = e.fifo(ctx)
		case Search:
			rep.Search, err = e.search(ctx)
		case Trace:
			rep.Trace, err = e.trace(ctx)
		case Locks:
			rep.Locks, err = e.locks(ctx)
		case Fanout:
			rep.Fanout, err = e.fanout(ctx)
		}
		if err != nil {
			return rep, fmt.Errorf("%s: %w", sc, err)
		}
		// Other processes on the machine take CPU from the nodes and
		// Postgres alike: say so rather than report their noise as ours.
		if other := e.noise[sc]; other > busyMachine {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf(
				"%s: processes other than the bench and its PostgreSQL server used up to %.0f%% of the machine's CPU in a measured window (server workers that exit within the window, such as autovacuum, count there too); if that was other load, these figures are not reliable", sc, other))
		}
	}
	rep.RSSMBPeak, rep.RSSScope = rss.peak(o.runs(Lifecycle))
	rep.RSSMBHighWater = rss.highWater()
	if len(o.URLs) > 0 {
		rep.RSSScope = "the bench process only: the nodes run elsewhere"
	}
	rep.Targets = targets(rep)
	return rep, nil
}
