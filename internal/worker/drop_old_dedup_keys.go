package worker

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/service"
)

// DropOldDedupKeys deletes idempotency keys whose window passed and whose
// message left the queue.
type DropOldDedupKeys struct {
	Config
	deps
}

// NewDropOldDedupKeys builds the job: every 30 s, BatchSize keys a run.
func NewDropOldDedupKeys(pool *pgxpool.Pool, svc *service.Service) *DropOldDedupKeys {
	return &DropOldDedupKeys{Config: batchConfig(30 * time.Second), deps: newDeps(pool, svc)}
}

// RunOnce deletes up to BatchSize keys and returns how many.
func (j *DropOldDedupKeys) RunOnce(ctx context.Context) (int, error) {
	n, err := j.q.DedupKeyDeleteExpired(ctx, db.DedupKeyDeleteExpiredParams{Now: j.now(), MaxKeys: int32(j.BatchSize)})
	return int(n), failed("drop old dedup keys", err)
}
