package bench

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/service"
)

// captureDB is a db.DBTX that records the statement sqlc would send instead
// of sending it, so the bench explains exactly skipq's claim, text and
// parameters, without a copy that could drift.
type captureDB struct {
	sql  string
	args []any
}

var errCaptured = errors.New("bench: statement captured, not run")

func (c *captureDB) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.sql, c.args = sql, args
	return pgconn.CommandTag{}, errCaptured
}

func (c *captureDB) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.sql, c.args = sql, args
	return nil, errCaptured
}

func (c *captureDB) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	c.sql, c.args = sql, args
	return errRow{}
}

type errRow struct{}

func (errRow) Scan(...any) error { return errCaptured }

// claimStatement is skipq's MessageClaim as a receive of max messages with
// the queue's visibility and the default response budget would send it.
func claimStatement(tenant, queue string, max int) (string, []any) {
	var c captureDB
	_, _ = db.New(&c).MessageClaim(context.Background(), db.MessageClaimParams{
		Tenant: tenant, Queue: queue, MaxMessages: int32(max), MaxPerGroup: 1, Mode: "claim",
		MaxResponseBytes: int64(service.DefaultLimits().MaxResponseBytes),
		MessageOverhead:  int64(service.MessageOverheadBytes + len(queue))})
	return c.sql, c.args
}

var (
	reExec     = regexp.MustCompile(`Execution Time: ([\d.]+) ms`)
	rePlan     = regexp.MustCompile(`Planning Time: ([\d.]+) ms`)
	reBuffers  = regexp.MustCompile(`Buffers: shared((?: \w+=\d+)+)`)
	reTopRows  = regexp.MustCompile(`actual time=[\d.]+\.\.[\d.]+ rows=(\d+)`)
	reBufCount = regexp.MustCompile(`(\w+)=(\d+)`)
)

// explainClaim runs EXPLAIN (ANALYZE, BUFFERS) of skipq's claim on a queue
// (the claim really runs: on a queue with messages it takes max of them),
// then times the same statement, prepared, once from Go.
func (e *env) explainClaim(ctx context.Context, queue string, max int, after string) (*Explain, error) {
	var tenant string
	if err := e.mon.QueryRow(ctx, monitorMark+"SELECT tenant FROM skipq.queues WHERE name = $1", queue).Scan(&tenant); err != nil {
		return nil, fmt.Errorf("explain: queue %s: %w", queue, err)
	}
	sql, args := claimStatement(tenant, queue, max)
	conn, err := e.mon.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	// Under the plan settings the node's statements run with (db.TxOptions).
	if _, err := conn.Exec(ctx, db.TxOptions.BeginQuery); err != nil {
		return nil, fmt.Errorf("explain claim: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "COMMIT") }()
	if err := warmClaim(ctx, conn, tenant, queue); err != nil {
		return nil, err
	}
	x, err := explain(ctx, conn, sql, args)
	if err != nil {
		return nil, err
	}
	x.After, x.MaxMessages = after, max

	// The same claim as a node runs it: prepared, then executed.
	if _, err := conn.Conn().Prepare(ctx, "bench_claim", sql); err != nil {
		return nil, err
	}
	start := time.Now()
	rs, err := conn.Query(ctx, "bench_claim", args...)
	if err == nil {
		for rs.Next() {
		}
		rs.Close()
		err = rs.Err()
	}
	x.RoundTripMS = round(float64(time.Since(start).Microseconds())/1000, 3)
	_ = conn.Conn().Deallocate(ctx, "bench_claim")
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return x, nil
}

// explainClaimRolledBack is EXPLAIN (ANALYZE, BUFFERS) of skipq's claim as a
// node runs it, under skipq's plan settings (db.TxOptions), in a
// transaction that is rolled back: whatever it claims stays as it was.
func (e *env) explainClaimRolledBack(ctx context.Context, queue string, max int) (*Explain, error) {
	var tenant string
	if err := e.mon.QueryRow(ctx, monitorMark+"SELECT tenant FROM skipq.queues WHERE name = $1", queue).Scan(&tenant); err != nil {
		return nil, fmt.Errorf("explain: queue %s: %w", queue, err)
	}
	sql, args := claimStatement(tenant, queue, max)
	tx, err := e.mon.BeginTx(ctx, db.TxOptions)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := warmClaim(ctx, tx, tenant, queue); err != nil {
		return nil, err
	}
	x, err := explain(ctx, tx, sql, args)
	if err != nil {
		return nil, err
	}
	x.MaxMessages = max
	return x, nil
}

// warmClaim runs the claim once for no message on the connection that will
// explain it: the claim is a PL/pgSQL function (skipq.message_claim), whose
// first call on a connection compiles it and plans its statement -- a
// node's connections pay that once, and an explain of that first call
// would report it (5 ms and 500 buffers of catalog reads) as the claim's.
// The explain shows the function's total time and buffers; its statement's
// plan is in docs/DESIGN.md ("The claim").
func warmClaim(ctx context.Context, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, tenant, queue string) error {
	sql, args := claimStatement(tenant, queue, 0)
	if _, err := q.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("warm the claim: %w", err)
	}
	return nil
}

// explain runs EXPLAIN (ANALYZE, BUFFERS) of a statement and summarizes it.
func explain(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string, args []any) (*Explain, error) {
	rows, err := q.Query(ctx, monitorMark+"EXPLAIN (ANALYZE, BUFFERS) "+sql, args...)
	if err != nil {
		return nil, fmt.Errorf("explain claim: %w", err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			rows.Close()
			return nil, err
		}
		plan = append(plan, line)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("explain claim: %w", err)
	}
	return parseExplain(plan), nil
}

func parseExplain(plan []string) *Explain {
	x := &Explain{Plan: plan}
	for i, line := range plan {
		if m := reExec.FindStringSubmatch(line); m != nil {
			x.ExecutionMS, _ = strconv.ParseFloat(m[1], 64)
		}
		if m := rePlan.FindStringSubmatch(line); m != nil {
			x.PlanningMS, _ = strconv.ParseFloat(m[1], 64)
		}
		if i == 0 {
			if m := reTopRows.FindStringSubmatch(line); m != nil {
				x.Rows, _ = strconv.ParseInt(m[1], 10, 64)
			}
		}
		// The first Buffers line is the top node's: everything the
		// statement's execution touched.
		if m := reBuffers.FindStringSubmatch(line); m != nil && x.SharedHit+x.SharedRead+x.SharedDirtied == 0 &&
			!strings.HasPrefix(strings.TrimSpace(prevLine(plan, i)), "Planning") {
			for _, kv := range reBufCount.FindAllStringSubmatch(m[1], -1) {
				n, _ := strconv.ParseInt(kv[2], 10, 64)
				switch kv[1] {
				case "hit":
					x.SharedHit = n
				case "read":
					x.SharedRead = n
				case "dirtied":
					x.SharedDirtied = n
				}
			}
		}
	}
	return x
}

func prevLine(plan []string, i int) string {
	if i == 0 {
		return ""
	}
	return plan[i-1]
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
