package db

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Open returns the statements of skipq on a pool, each run outside a
// caller's transaction the way it needs to reach Postgres: this package
// decides it per statement (routed), so no caller can pick the wrong way.
// Inside a transaction (Queries.WithTx begun with TxOptions) every
// statement runs with the plan settings the BEGIN set.
func Open(pool *pgxpool.Pool) *Queries {
	return New(routed{planned: planned{pool: pool}, direct: direct{pool: pool}})
}

// directStatements are the statements that run as they are, with nothing
// piped ahead; every other runs planned (with planSettings, in the same
// pipeline). Each is here for one of three reasons:
//   - it calls a function that carries the plan settings in its own
//     definition (SET clauses), so piping them again would only cost a
//     statement (TestDirectStatementsAgreeWithTheFunctions checks that every
//     such call is listed);
//   - it reads a table of a few rows, or must scan or sort one on purpose
//     (the gauges, the console's history, the jobs' turns), which the plan
//     settings would make a plan of "disabled" nodes;
//   - it cannot run in a transaction block (VACUUM) or reads no table.
var directStatements = map[string]bool{
	// Functions with their own plan settings.
	"MessageInsert":                 true,
	"MessageClaim":                  true,
	"MessageClaimQueues":            true,
	"MessageAckByReceipt":           true,
	"MessageNack":                   true,
	"MessageSetVisibilityByReceipt": true,
	"MessageRequeue":                true,
	"MessageDeadLetter":             true,
	"MessageFire":                   true,
	"GroupPrune":                    true,
	"GroupRelease":                  true,
	"TimerWait":                     true,
	"TopicReplay":                   true,
	"TopicCopiesReady":              true,
	"TopicRetentionPrune":           true,
	// Small tables, scans and sorts on purpose.
	"WakeNotify":          true,
	"APIKeyGetByID":       true,
	"JobTakeTurn":         true,
	"QueueCountsList":     true,
	"QueueCountsStep":     true,
	"ConsoleQueueList":    true,
	"ConsoleQueueCounts":  true,
	"DepthHistoryRecord":  true,
	"DepthHistoryTenant":  true,
	"DepthHistoryQueue":   true,
	"DepthSnapshotsPrune": true,
	"DepthHistoryPrune":   true,
	// Outside any transaction, or no table at all.
	"MessageVacuum":     true,
	"MessageDeadTuples": true,
	"ReadyVacuum":       true,
	"ReadyDeadTuples":   true,
}

// statementName is the name on a statement's first line ("-- name: X
// :kind", which sqlc writes and the hand-written statements copy), or ""
// when it has none.
func statementName(sql string) string {
	rest, ok := strings.CutPrefix(sql, "-- name: ")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, " ")
	return name
}

// routed runs each statement planned or direct, by its name.
type routed struct {
	planned planned
	direct  direct
}

var _ DBTX = routed{}

func (r routed) route(sql string) DBTX {
	if directStatements[statementName(sql)] {
		return r.direct
	}
	return r.planned
}

// Exec runs one statement the way its name says.
func (r routed) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return r.route(sql).Exec(ctx, sql, args...)
}

// Query runs one statement the way its name says.
func (r routed) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return r.route(sql).Query(ctx, sql, args...)
}

// QueryRow runs one statement the way its name says.
func (r routed) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return r.route(sql).QueryRow(ctx, sql, args...)
}
