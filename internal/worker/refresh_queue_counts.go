package worker

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/service"
)

// RefreshQueueCounts takes the next step of the gauge snapshot's count (a
// pass starts once per QueueCountsPeriod cluster-wide and reads BatchSize
// pages of the messages table a step, whichever node steps), then hands
// the snapshot to the service's observer (the metrics gauges). Every node
// exports the same snapshot.
type RefreshQueueCounts struct {
	Config
	deps
}

// QueueCountsPeriod is how often, cluster-wide, a count of the gauge
// snapshot starts.
const QueueCountsPeriod = 15 * time.Second

// maxGaugeQueues bounds the queues the gauges cover (the largest ones).
const maxGaugeQueues = 1000

// queueCountsStepPages bounds the pages of the messages table one step
// reads (16 MB), so a run costs the same whatever the backlog and no
// statement holds its snapshot (and with it vacuum's horizon) for long.
const queueCountsStepPages = 2048

// NewRefreshQueueCounts builds the job: every 5 s.
func NewRefreshQueueCounts(pool *pgxpool.Pool, svc *service.Service) *RefreshQueueCounts {
	return &RefreshQueueCounts{Config: Config{Period: 5 * time.Second, Timeout: 30 * time.Second, BatchSize: queueCountsStepPages},
		deps: newDeps(pool, svc)}
}

// RunOnce takes a step of the count and reports the snapshot.
func (j *RefreshQueueCounts) RunOnce(ctx context.Context) error {
	if _, err := j.q.QueueCountsStep(ctx, db.QueueCountsStepParams{Now: j.now(),
		PeriodSeconds: int32(QueueCountsPeriod / time.Second), MaxPages: int32(j.BatchSize)}); err != nil {
		return failed("count queues", err)
	}
	rows, err := j.q.QueueCountsList(ctx, maxGaugeQueues)
	if err != nil {
		return failed("read queue counts", err)
	}
	counts := make([]service.QueueCount, len(rows))
	for i, r := range rows {
		counts[i] = service.QueueCount{Tenant: r.Tenant, Queue: r.Name, Available: r.Available, Delayed: r.Delayed,
			InFlight: r.InFlight, OldestAvailableAt: r.OldestAvailableAt}
	}
	j.svc.ObserveQueueCounts(counts)
	return nil
}
