package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// PoolOptions are the pool settings skipq exposes.
type PoolOptions struct {
	MaxConns int32
	// ConnectTimeout bounds how long a request waits for a new connection when
	// the database is unreachable, so the API answers 503 instead of hanging.
	ConnectTimeout time.Duration
}

// NewPool opens a pgx pool. It does not wait for the database: a node starts
// (and answers 503) while Postgres is away.
func NewPool(ctx context.Context, url string, opts PoolOptions) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.ConnectTimeout > 0 {
		cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	}
	cfg.HealthCheckPeriod = 5 * time.Second
	// Every skipq statement is written for an index. Queue tables are often
	// analyzed while nearly empty, and with such statistics a sequential or
	// bitmap scan (or a sort, or a hash join over one) looks free: forbid
	// them on skipq's own connections so the plans stay the intended index
	// scans whatever the statistics say (docs/DESIGN.md, "The claim"). The
	// few statements that must scan (the gauges) allow it for their own
	// transaction with PlanAllowScans.
	for param, value := range planSettings {
		cfg.ConnConfig.RuntimeParams[param] = value
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	return pool, nil
}

// planSettings are the session settings that pin skipq's plans.
var planSettings = map[string]string{
	"enable_seqscan":    "off",
	"enable_bitmapscan": "off",
	// Without sorts, ORDER BY sequence LIMIT n can only be the ordered walk
	// of the primary key, never "any index on queue_id, then sort".
	"enable_sort":      "off",
	"enable_hashjoin":  "off",
	"enable_mergejoin": "off",
	// A plan that has to use a "disabled" node (the sort of a batch insert's
	// ORDER BY, say) costs over 10^10, far above jit_above_cost: without
	// this, such statements would be JIT-compiled on every call (~270 ms).
	"jit": "off",
}
