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

// NewReplayTopics builds the job: every 5 s (a replay starts within that of
// its subscribe; an idle node's statements stay few), and again after each
// step's rest while a replay goes on.
func NewReplayTopics(pool *pgxpool.Pool, svc *service.Service) *ReplayTopics {
	return &ReplayTopics{Config: batchConfig(5 * time.Second), deps: newDeps(pool, svc)}
}

// replayPause is how long the job rests after a step, in steps' lengths:
// a replay takes at most about a sixth of one connection's time, and of
// the database's, so that publishers go on at nearly their pace (the
// fanout bench measures them during a replay). It was 3 (a quarter) while
// a publish wrote every group's copy; since copies are made at claim
// (00060) a publish costs a third of what it did, and a replay's copies,
// still written at once, took a larger share of the machine: publishes
// during a replay fell to 0.76–0.79 of without (the target is 0.8).
const replayPause = 5

// RunOnce runs one step. While the replay goes on it rests replayPause
// times the step's length and reports BatchSize (the worker runs the job
// again then); else it reports the copies it sent.
func (j *ReplayTopics) RunOnce(ctx context.Context) (int, error) {
	start := time.Now()
	rows, err := j.q.TopicReplay(ctx, int32(j.BatchSize))
	if err != nil {
		return 0, failed("replay topics", err)
	}
	took := time.Since(start)
	n := 0
	for _, r := range rows {
		if r.Available > 0 {
			j.svc.Hub().Publish(r.QueueID, int(r.Available))
		}
		n = int(r.Copied)
		if r.More {
			n = j.BatchSize
			t := time.NewTimer(replayPause * took)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
	}
	return n, nil
}
