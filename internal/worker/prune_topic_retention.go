package worker

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/service"
)

// PruneTopicRetention removes the retained messages of topics whose
// retention ended (retainSeconds after their publish; every one of a topic
// deleted or retaining nothing now), never one a replay has still to go
// through (skipq.topic_retention_prune). Their bodies go with TopicUpkeep
// once no copy names them.
type PruneTopicRetention struct {
	Config
	deps
}

// NewPruneTopicRetention builds the job: every 10 s, BatchSize retained
// messages a run (and at once again while runs fill it).
func NewPruneTopicRetention(pool *pgxpool.Pool, svc *service.Service) *PruneTopicRetention {
	return &PruneTopicRetention{Config: batchConfig(10 * time.Second), deps: newDeps(pool, svc)}
}

// RunOnce removes up to BatchSize retained messages and returns how many.
func (j *PruneTopicRetention) RunOnce(ctx context.Context) (int, error) {
	n, err := j.q.TopicRetentionPrune(ctx, db.TopicRetentionPruneParams{Now: j.nowOr(time.Now()),
		MaxMessages: int32(j.BatchSize)})
	if err != nil {
		return 0, failed("prune topic retention", err)
	}
	return int(n), nil
}
