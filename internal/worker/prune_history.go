package worker

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/service"
)

// PruneHistory removes the history of messages gone more than
// service.HistoryKeepSeconds ago.
type PruneHistory struct {
	Config
	deps
}

// NewPruneHistory builds the job: every minute, BatchSize messages'
// histories a run.
func NewPruneHistory(pool *pgxpool.Pool, svc *service.Service) *PruneHistory {
	return &PruneHistory{Config: batchConfig(time.Minute), deps: newDeps(pool, svc)}
}

// RunOnce removes the history of up to BatchSize messages and returns how
// many.
func (j *PruneHistory) RunOnce(ctx context.Context) (int, error) {
	n, err := j.q.MessageEventsPrune(ctx, db.MessageEventsPruneParams{Now: j.now(),
		KeepSeconds: service.HistoryKeepSeconds, MaxTraces: int32(j.BatchSize)})
	return int(n), failed("prune message history", err)
}
