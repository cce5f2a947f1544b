package worker

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/service"
)

// ReadyTopicCopies makes ready messages of the topic copies that no claim
// made within PendingFor of their publish (skipq.topic_copies_ready). A
// publish leaves most copies for their group's claims to make
// (docs/DESIGN.md, "Topic copies made at claim"); until a copy is made,
// browse, search, lookups by id, peeks and the gauges do not see it, and a
// group's claims take its ready messages first. This job bounds both: a
// copy is an ordinary ready message at most PendingFor plus a period after
// its publish, an expired one is dropped, and the copies of a queue deleted
// since go with it. Nodes share the rows: a run passes over those another
// node's run or a claim holds.
type ReadyTopicCopies struct {
	Config
	deps
	// PendingFor is how long a copy is left to its group's claims.
	PendingFor time.Duration
}

// pendingRowCopies is the most copies one pending row holds (the publish's
// rows of 32, skipq.topic_publish).
const pendingRowCopies = 32

// NewReadyTopicCopies builds the job: every 5 s (an idle node's statements
// stay few: the contract allows 5 a second in all), up to BatchSize copies
// pending for 10 s or more, oldest first, and no more until the next
// period (the worker runs it once a tick): longer than a consumer that
// keeps up takes to claim them, and few enough not to compete with the
// claims of a group that works through a backlog, which make its copies
// at a claim's cost where the job pays a publish's. A copy of a group
// nobody reads is ready within about 15 s while its topic publishes under
// 200 messages a second to it, later beyond.
func NewReadyTopicCopies(pool *pgxpool.Pool, svc *service.Service) *ReadyTopicCopies {
	return &ReadyTopicCopies{Config: batchConfig(5 * time.Second), deps: newDeps(pool, svc), PendingFor: 10 * time.Second}
}

// RunOnce makes up to BatchSize copies ready (in rows of up to 32), wakes
// their queues' receivers, and reports how many it took from pending rows
// (expired ones included). The worker runs it once a period however many.
func (j *ReadyTopicCopies) RunOnce(ctx context.Context) (int, error) {
	rows, err := j.q.TopicCopiesReady(ctx, db.TopicCopiesReadyParams{
		Now:            j.now(),
		PendingSeconds: j.PendingFor.Seconds(),
		MaxRows:        int32(max(1, j.BatchSize/pendingRowCopies)),
	})
	if err != nil {
		return 0, failed("ready topic copies", err)
	}
	n := 0
	for _, r := range rows {
		if r.Readied > 0 {
			j.svc.Hub().Publish(r.QueueID, int(r.Readied))
		}
		n += int(r.Readied)
	}
	return n, nil
}
