package worker

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/service"
)

// RemoveStaleReady removes the ready rows left behind by a settle that
// raced the worker readying its message (see ReadyStaleRemove), looking at
// the first readyHeadRows of each queue.
type RemoveStaleReady struct {
	Config
	deps
}

// readyHeadRows is how many ready rows of each queue a run checks: a stale
// row matters once claims reach it, at the head.
const readyHeadRows = 16

// NewRemoveStaleReady builds the job: every 10 s.
func NewRemoveStaleReady(pool *pgxpool.Pool, svc *service.Service) *RemoveStaleReady {
	return &RemoveStaleReady{Config: Config{Period: 10 * time.Second, Timeout: time.Minute}, deps: newDeps(pool, svc)}
}

// RunOnce removes the stale rows at the head of every queue.
func (j *RemoveStaleReady) RunOnce(ctx context.Context) error {
	_, err := j.q.ReadyStaleRemove(ctx, readyHeadRows)
	return failed("remove stale ready rows", err)
}
