package worker

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/service"
)

// PruneGroups deletes the rows of FIFO groups left without messages
// (skipq.group_prune): those a settle could not prune, and those of purged
// queues, expired messages and deleted queues. Each run looks at the next
// groupPruneWindow groups of a walk over them all, which wraps around at
// the end. Nodes walk on their own; any of them prunes what it finds.
type PruneGroups struct {
	Config
	deps
	mu sync.Mutex
	// afterQueueID and afterGroupID are where this node's walk stands (nil:
	// at the start).
	afterQueueID *int64
	afterGroupID *string
}

// groupPruneWindow is how many groups one run looks at: one probe of the
// messages each.
const groupPruneWindow = 10_000

// NewPruneGroups builds the job: every 10 s, BatchSize groups a run.
func NewPruneGroups(pool *pgxpool.Pool, svc *service.Service) *PruneGroups {
	return &PruneGroups{Config: batchConfig(10 * time.Second), deps: newDeps(pool, svc)}
}

// RunOnce deletes up to BatchSize empty groups of the window and returns
// how many: BatchSize when the window had more.
func (j *PruneGroups) RunOnce(ctx context.Context) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	r, err := j.q.GroupPrune(ctx, db.GroupPruneParams{MaxGroups: int32(j.BatchSize), ScanGroups: groupPruneWindow,
		AfterQueueID: j.afterQueueID, AfterGroupID: j.afterGroupID})
	if err != nil {
		return 0, failed("prune empty groups", err)
	}
	j.afterQueueID, j.afterGroupID = r.NextQueueID, r.NextGroupID
	return int(r.Pruned), nil
}
