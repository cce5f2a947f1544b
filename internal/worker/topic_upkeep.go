package worker

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/service"
)

// TopicUpkeep keeps the topics' tables (skipq.topic_upkeep): it folds the
// publishes' counts into their topics, removes the subscriptions of
// deleted queues, and removes the published bodies that no copy names any
// more once their dedup window ended. Each run looks at the next
// BatchSize bodies of a walk over them all, which wraps around at the
// end; nodes walk on their own.
type TopicUpkeep struct {
	Config
	deps
	mu sync.Mutex
	// after is where this node's walk stands (0: at the start).
	after int64
}

// NewTopicUpkeep builds the job: every 10 s, BatchSize bodies a run.
func NewTopicUpkeep(pool *pgxpool.Pool, svc *service.Service) *TopicUpkeep {
	return &TopicUpkeep{Config: batchConfig(10 * time.Second), deps: newDeps(pool, svc)}
}

// RunOnce does one round; it reports 0 (the job never runs again at once:
// a round looks at a window whatever it removes).
func (j *TopicUpkeep) RunOnce(ctx context.Context) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	next, err := j.q.TopicUpkeep(ctx, db.TopicUpkeepParams{After: j.after, MaxBodies: int32(j.BatchSize)})
	if err != nil {
		return 0, failed("topic upkeep", err)
	}
	j.after = next
	return 0, nil
}
