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
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	return pool, nil
}
