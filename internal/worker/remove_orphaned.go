package worker

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/service"
)

// RemoveOrphaned deletes messages whose queue was deleted while a send or
// a move into it was running (see MessageDeleteOrphaned). They are
// unreachable already; this frees their space.
type RemoveOrphaned struct {
	Config
	deps
}

// NewRemoveOrphaned builds the job: every 30 s, BatchSize messages a run.
func NewRemoveOrphaned(pool *pgxpool.Pool, svc *service.Service) *RemoveOrphaned {
	return &RemoveOrphaned{Config: batchConfig(30 * time.Second), deps: newDeps(pool, svc)}
}

// RunOnce deletes up to BatchSize messages and returns how many.
func (j *RemoveOrphaned) RunOnce(ctx context.Context) (int, error) {
	rows, err := j.q.MessageDeleteOrphaned(ctx, int32(j.BatchSize))
	return len(rows), failed("remove messages of deleted queues", err)
}
