// Package bench measures skipq against its performance targets
// (docs/PERFORMANCE.md): the full message lifecycle over HTTP next to the same
// lifecycle in plain SQL on the same database, wake latency, throughput behind
// a large backlog, what a receive costs behind delayed and in-flight messages,
// the cost of idle long-polls, and the node's memory. `skipq-bench` is its
// command line.
//
// By default it is self-contained: a private, durable PostgreSQL cluster under
// .skipq/bench (fsync and synchronous_commit on), a fresh database migrated for
// the run and dropped after it, and in-process nodes on 127.0.0.1. Options.URLs
// and Options.DatabaseURL point it at running nodes and an existing database.
//
// # Harness and scenarios
//
// The harness is every file named harness_*.go: how to measure. Only Run
// and Report name the scenarios, to run them in order and to hold their
// results.
//
//   - harness_run.go: Options, the scenario names and their order, Run.
//   - harness_env.go: env, what every scenario shares (the private cluster and
//     its fresh database, the monitoring pool, pools and bulk loads, VACUUM and
//     CHECKPOINT before each measured run, fresh queue names).
//   - harness_nodes.go: in-process nodes, or the running ones of --url.
//   - harness_nodeproc.go: nodes in processes of their own (the bench's
//     executable started again), for the sqs and kubemq scenarios, which
//     compare two client stacks and must not run them in the node's
//     process.
//   - harness_client.go: the HTTP client, senders and receivers.
//   - harness_drive.go: producers and consumers of a workload bounded by
//     credits through warm-up, one measured window and a drain; the HTTP
//     lifecycle workload most scenarios drive, its consumers in either
//     ConsumerShape.
//   - harness_probe.go: what a measured window records: the machine's CPU
//     split, wait events of busy backends, pg_stat_statements, commits, WAL and
//     vacuums, the process's RSS.
//   - harness_explain.go: EXPLAIN (ANALYZE, BUFFERS) of skipq's claim.
//   - harness_wake.go: wake-latency samples of waiting long-polls, the shape
//     the latency and sqs scenarios share.
//   - harness_report.go: Report (the JSON of `skipq-bench --json`), the
//     targets it is checked against, the frame of the text report and its
//     number formatting.
//
// Each scenario is the file of its name: lifecycle.go, sqlconsumer.go,
// latency.go, sqs.go, trace.go, locks.go, idle.go, heads.go, backlog.go,
// fifo.go and search.go hold the method that runs it, its result type (its
// part of Report) and its section of the text report. A scenario builds on
// the harness and the frozen baseline, not on another scenario's code; the
// sqlconsumer and backlog scenarios read the lifecycle's result when it ran
// before them.
//
// The harness is files of this package rather than a package of its own
// because every scenario is a method on env that uses a dozen of its
// unexported helpers: a harness package would export all of them for its one
// importer, and Report, whose fields are the scenarios' result types, would
// be split across the two. The file names draw the same line.
//
// # The frozen baseline
//
// frozen_baseline.go is the plain-SQL lifecycle that the lifecycle and
// sqlconsumer scenarios measure skipq against (the raw figures and the
// HTTP/raw ratios). Its table (skipq_bench.raw_messages, frozenBaselineSchema)
// and statements are a yardstick, frozen on purpose: they keep the one-table
// layout skipq had before its flat claims and must not follow skipq's
// migrations, or ratios measured in different releases stop being
// comparable. It takes only two things from skipq's schema: a queue id (a row
// of skipq.queues) and its sequence numbers (skipq.message_sequence). Change
// it only as a new baseline, on purpose, and say so in docs/PERFORMANCE.md.
//
// pgmq_shape.go is the second baseline of the lifecycle scenario: the same
// lifecycle in pgmq's shapes (a table per queue, its read and delete),
// written as well as the project can. real_pgmq.go is the third, measured
// only when the user gives pgmq's own install file: real pgmq's functions,
// in a database of its own. The lifecycle's targets compare HTTP with the
// strongest of those measured at each point.
package bench
