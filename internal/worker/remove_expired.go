package worker

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/service"
)

// RemoveExpired deletes expired messages that are not in a live lease, and
// retained messages whose retention ended (counted as no expiry).
type RemoveExpired struct {
	Config
	deps
}

// NewRemoveExpired builds the job: every 4 s, BatchSize messages a run.
func NewRemoveExpired(pool *pgxpool.Pool, svc *service.Service) *RemoveExpired {
	return &RemoveExpired{Config: batchConfig(4 * time.Second), deps: newDeps(pool, svc)}
}

// RunOnce deletes up to BatchSize messages and returns how many.
func (j *RemoveExpired) RunOnce(ctx context.Context) (int, error) {
	rows, err := j.q.MessageDeleteExpired(ctx, db.MessageDeleteExpiredParams{Now: j.now(), MaxMessages: int32(j.BatchSize)})
	if err != nil {
		return 0, failed("remove expired messages", err)
	}
	expired := map[int64]int{}
	for _, r := range rows {
		if !r.Retained {
			expired[r.QueueID]++
		}
	}
	j.svc.ObserveExpired(ctx, expired)
	return len(rows), nil
}
