package worker

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/service"
)

// RefreshQueueCounts recounts the gauge snapshot if it is this node's
// turn, then hands the snapshot to the service's observer (the metrics
// gauges). Every node exports the same snapshot; only one node per
// QueueCountsPeriod pays for the count.
type RefreshQueueCounts struct {
	Config
	deps
}

// QueueCountsPeriod is how often, cluster-wide, the gauge snapshot is
// recounted from the messages table.
const QueueCountsPeriod = 15 * time.Second

// maxGaugeQueues bounds the queues the gauges cover (the largest ones).
const maxGaugeQueues = 1000

// NewRefreshQueueCounts builds the job: every 5 s.
func NewRefreshQueueCounts(pool *pgxpool.Pool, svc *service.Service) *RefreshQueueCounts {
	return &RefreshQueueCounts{Config: Config{Period: 5 * time.Second, Timeout: 30 * time.Second}, deps: newDeps(pool, svc)}
}

// RunOnce recounts if it is this node's turn and reports the snapshot.
func (j *RefreshQueueCounts) RunOnce(ctx context.Context) error {
	turn, err := j.q.JobTakeTurn(ctx, db.JobTakeTurnParams{Now: j.now(), Job: "queue_counts",
		PeriodSeconds: int32(QueueCountsPeriod / time.Second)})
	if err != nil {
		return failed("count queues", err)
	}
	if turn {
		err := j.inTx(ctx, func(q *db.Queries) error {
			if err := q.PlanAllowScans(ctx); err != nil {
				return err
			}
			if err := q.QueueCountsClear(ctx); err != nil {
				return err
			}
			return q.QueueCountsRefresh(ctx, j.now())
		})
		if err != nil {
			return failed("count queues", err)
		}
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
