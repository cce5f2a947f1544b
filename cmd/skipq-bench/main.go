// Command skipq-bench measures skipq against its performance targets
// (docs/PERFORMANCE.md). It is a command of its own so that the server
// binary carries neither the bench nor the AWS SDK its sqs scenario drives.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/skipq/skipq/internal/bench"
)

const benchUsage = `Usage: skipq-bench [flags]

Measures skipq and checks the figures against its performance targets: it
prints a table per scenario and then one line per target, "met" or "NOT met"
(or, with --json, one JSON object whose "targets" list holds the same). By default it is self-contained: a private, durable PostgreSQL under
./.skipq/bench (fsync and synchronous_commit on), a fresh database for the run
(dropped afterwards) and in-process nodes on 127.0.0.1. It does not read
SKIPQ_DATABASE_URL: it writes a million rows, so pointing it at a database
takes --database-url.

Scenarios (--scenario, comma-separated; default all):
  lifecycle  send → receive → ack over HTTP and the same in plain SQL,
             batch 1 and 100 × 1, 4 and 16 producer/consumer pairs; the
             consumers ack with their next receive (--ack-in-receive);
             with --pgmq-sql, real pgmq at every point as well
  sqlconsumer the same lifecycle with consumers in SQL (HTTP sends,
             skipq.receive, skipq.ack) next to the plain-SQL baseline
  latency    send answered → waiting receive answered, p50/p90/p99
  sqs        the lifecycle through aws-sdk-go-v2 (batch 1 × 16 and 10 × 4
             pairs) next to the native HTTP API, and the wake latency of
             SQS long polls; its node runs in a process of its own, so
             the CPU of the node and of each side's clients are reported
             apart
  kubemq     the lifecycle over KubeMQ's QueuesUpstream + QueuesDownstream
             streams (batch 1 × 16 and 100 × 4 pairs) next to the native
             HTTP API, and the wake latency of a waiting Downstream Get;
             its node runs in a process of its own, as the sqs scenario's
  trace      the lifecycle over HTTP on traced queues (message history)
             next to untraced ones, batch 1 × 16 and 100 × 4 pairs, runs
             alternating untraced, traced, traced, untraced; history rows
             written per message
  locks      16 clients sending to 4 queues with nothing held, then for
             twice the run's length while SQL transactions hold a FIFO
             group and an idempotency key that other sends keep waiting
             on, then with nothing held again: msgs/s and p99 of both
  fanout     topics: publishes with 1 and 10 subscriptions next to sends
             to one queue (batch 1 × 16 and 100 × 4 publishers, 1 KiB
             bodies), each group's drain by 2 consumers next to a plain
             queue's (three windows of each in turns, the median ratio),
             the storage of a published message next to a sent
             one, a publish's wake-up of a receiver on each group, and
             publishes during a replay of 1,000,000 retained messages
             (--replay-retained) next to publishes without
  idle       1,000 waiting long-polls on one node: connections, statements/s
  heads      p50 of one client's send → receive → ack cycle on an empty queue,
             behind 1,000,000 delayed messages (delay 1 h) and behind 100,000
             in-flight ones (lease 1 h); 300 cycles per queue, fewer (at
             least 50) once a minute of them has passed
  backlog    batch 1 × 4 pairs behind a 1,000,000-message backlog vs empty
  fifo       FIFO queues next to standard ones: the lifecycle, a receive
             past a group in flight, a group's wake-up
  search     a page of 100 of GET /v1/messages per filter in a tenant of
             1,000,000 messages (its own: an API key of a fresh tenant),
             p50/p99 over HTTP and auto_explain plans of one page

A default run (every scenario) takes about 10 minutes on 2 cores: about
2.5 minutes for lifecycle, sqlconsumer, latency, sqs, idle, backlog and fifo
together (5 s per measured run after 1 s of warm-up), about 3 minutes for
heads (filling 1,100,000 messages through skipq's SQL API and HTTP
receives, then the cycles), about 2.5 minutes for search (loading 1,000,000
messages, then 14 searches × 53 requests), about 1 minute for trace (eight
lifecycle runs) and about 25 s for locks (four runs' length). --quick takes
about 1 minute (3 s per run, batch 1 and 100 × 4 pairs, a 100,000-message
backlog and search, 200 latency samples, 3 s idle, heads behind 100,000
delayed and 20,000 in-flight messages with 100 cycles per queue).

Targets: a ratio compares two figures of the same run ("HTTP / raw SQL":
skipq's lifecycle over HTTP against the same lifecycle written in plain SQL
on the same database; traced / untraced, FIFO / standard, behind a backlog /
on an empty queue); the others bound a latency, a count or the memory used.
"HTTP vs pgmq" holds skipq's HTTP throughput to pgmq 1.5.2's published
figures for the same batch and pairs on a 2-vCPU machine: absolute numbers,
which a slower machine misses. docs/PERFORMANCE.md gives each target's
reason and the latest results, and "Comparison with published pgmq figures"
there says where the pgmq numbers come from.

Flags:
`

// errUsage marks errors that are the caller's words being off (exit 2).
var errUsage = errors.New("usage")

func main() {
	if bench.ServeNodeProcess() {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := cmdBench(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		fmt.Fprintf(os.Stderr, "skipq-bench: %v (skipq-bench -h lists the flags)\n", err)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "skipq-bench: %v\n", err)
		os.Exit(1)
	}
}

// cmdBench runs the bench with args.
func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, benchUsage)
		fs.PrintDefaults()
	}
	asJSON := fs.Bool("json", false, "print one JSON object instead of tables")
	quick := fs.Bool("quick", false, "a short smoke run (CI)")
	scenarios := fs.String("scenario", "", "comma-separated scenarios: lifecycle, sqlconsumer, latency, sqs, kubemq, trace, locks, fanout, idle, heads, backlog, fifo, search (default all)")
	duration := fs.Duration("duration", 0, "each measured run (default 5s; 3s with --quick)")
	urls := fs.String("url", "", "comma-separated URLs of running nodes to drive instead of in-process ones (needs --database-url)")
	dbURL := fs.String("database-url", "", "an existing, migrated database instead of a fresh one on the private cluster")
	nodes := fs.Int("nodes", 1, "in-process nodes; pairs and latency receivers spread over them")
	points := fs.String("points", "", "lifecycle points as BATCHxPAIRS, comma-separated (default 1x1,1x4,1x16,100x1,100x4,100x16; --quick 1x4,100x4)")
	headsDelayed := fs.Int("heads-delayed", 0, "delayed messages ahead of the heads cycle (default 1000000; 100000 with --quick)")
	headsInFlight := fs.Int("heads-in-flight", 0, "in-flight messages ahead of the heads cycle (default 100000; 20000 with --quick)")
	replayRetained := fs.Int("replay-retained", 0, "retained messages the fanout scenario's replay goes through while publishers publish (default 1000000; 20000 with --quick)")
	ackInReceive := fs.Bool("ack-in-receive", true, "consumers ack what they got with their next receive (\"ack\" of the receive, as the Go client's consumer loop), the plain-SQL baselines with their next read; false: an ack request (a delete) of its own after each receive")
	pgmqSQL := fs.String("pgmq-sql", "", "pgmq's SQL install file (pgmq-extension/sql/pgmq.sql of a pgmq release; not part of skipq): the lifecycle scenario loads it into a database of its own on the bench's cluster and measures real pgmq at every point beside the other baselines")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of one HTTP lifecycle window to this file: the batch-1 point with the most pairs (none: the first point); with the sqs scenario but not lifecycle, the node's in the SQS batch-1 window")
	cpuProfileNative := fs.String("cpuprofile-native", "", "with the sqs scenario but not lifecycle: write the node's CPU profile of the native HTTP window beside the SQS batch-1 one to this file")
	memProfile := fs.String("memprofile", "", "write this process's allocation profile of the whole run to this file (in-process nodes and clients together; go tool pprof -sample_index=alloc_space)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: bench takes no arguments (got %q)", errUsage, fs.Args())
	}
	opts := bench.Options{
		Quick:       *quick,
		Duration:    *duration,
		DatabaseURL: *dbURL,
		Nodes:       *nodes,
		APIKey:      os.Getenv("SKIPQ_API_KEY"),
		PgmqSQL:     *pgmqSQL,
		Progress:    stderr,
	}
	if !*ackInReceive {
		opts.ConsumerShape = bench.AckSeparately
	}
	if *duration < 0 || (*duration > 0 && *duration < 100*time.Millisecond) {
		return fmt.Errorf("%w: --duration must be at least 100ms", errUsage)
	}
	if *headsDelayed < 0 || *headsInFlight < 0 {
		return fmt.Errorf("%w: --heads-delayed and --heads-in-flight must not be negative", errUsage)
	}
	opts.HeadsDelayed, opts.HeadsInFlight = *headsDelayed, *headsInFlight
	if *replayRetained < 0 {
		return fmt.Errorf("%w: --replay-retained must not be negative", errUsage)
	}
	opts.ReplayRetained = *replayRetained
	if *nodes < 1 {
		return fmt.Errorf("%w: --nodes must be at least 1", errUsage)
	}
	if *scenarios != "" {
		for _, s := range strings.Split(*scenarios, ",") {
			s = strings.TrimSpace(s)
			if !slices.Contains(bench.Scenarios, s) {
				return fmt.Errorf("%w: unknown scenario %q (want %s)", errUsage, s, strings.Join(bench.Scenarios, ", "))
			}
			opts.Scenarios = append(opts.Scenarios, s)
		}
	}
	if *points != "" {
		for _, p := range strings.Split(*points, ",") {
			var pt bench.Point
			if _, err := fmt.Sscanf(strings.TrimSpace(p), "%dx%d", &pt.Batch, &pt.Pairs); err != nil || pt.Batch < 1 || pt.Batch > 1000 || pt.Pairs < 1 {
				return fmt.Errorf("%w: --points: %q is not BATCHxPAIRS (batch 1…1000, pairs ≥ 1)", errUsage, p)
			}
			opts.Matrix = append(opts.Matrix, pt)
		}
	}
	if *urls != "" {
		for _, u := range strings.Split(*urls, ",") {
			opts.URLs = append(opts.URLs, strings.TrimRight(strings.TrimSpace(u), "/"))
		}
		if *dbURL == "" {
			return fmt.Errorf("%w: --url needs --database-url (the database those nodes use)", errUsage)
		}
	}
	for name, to := range map[string]*io.Writer{*cpuProfile: &opts.CPUProfile, *cpuProfileNative: &opts.CPUProfileNative} {
		if name == "" {
			continue
		}
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		defer f.Close()
		*to = f
	}

	rep, err := bench.Run(ctx, opts)
	if err != nil {
		return err
	}
	if *memProfile != "" {
		if err := writeAllocProfile(*memProfile); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.WriteText(stdout)
	return nil
}

// writeAllocProfile writes the allocations made since the process started
// to name.
func writeAllocProfile(name string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
