package worker

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/service"
)

// ReplayTopics sends new subscriptions that asked for a replay the retained
// messages of their topic (skipq.topic_replay): each step takes one
// replaying subscription, BatchSize retained messages in publish order,
// and sends those published since the subscription's replayFrom that match
// its filter to its queue; the last step makes the subscription live.
// Publishers do not wait for a replay (docs/DESIGN.md, "Retention and
// replay"). Nodes share the replays: a step skips a subscription another
// node's step holds.
type ReplayTopics struct {
	Config
	deps
}

// NewReplayTopics builds the job: every second, and at once again while a
// replay goes on.
func NewReplayTopics(pool *pgxpool.Pool, svc *service.Service) *ReplayTopics {
	return &ReplayTopics{Config: batchConfig(time.Second), deps: newDeps(pool, svc)}
}

// RunOnce runs one step. It reports BatchSize while the replay goes on
// (the worker runs the job again at once), else the copies it sent.
func (j *ReplayTopics) RunOnce(ctx context.Context) (int, error) {
	rows, err := j.q.TopicReplay(ctx, int32(j.BatchSize))
	if err != nil {
		return 0, failed("replay topics", err)
	}
	n := 0
	for _, r := range rows {
		if r.Available > 0 {
			j.svc.Hub().Publish(r.QueueID, int(r.Available))
		}
		n = int(r.Copied)
		if r.More {
			n = j.BatchSize
		}
	}
	return n, nil
}
