package worker

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/service"
)

// RecordDepthHistory copies the gauge snapshot into the console's depth
// history if it is this node's turn (once per service.DepthHistoryPeriod
// cluster-wide), then drops history older than service.DepthHistoryKept.
type RecordDepthHistory struct {
	Config
	deps
}

// depthPruneBatches bounds the prune statements of one turn: each drops at
// most BatchSize rows, and a turn adds at most maxGaugeQueues, so a backlog
// (after the worker was down) drains within a few turns.
const depthPruneBatches = 10

// NewRecordDepthHistory builds the job: every 20 s, prune statements of
// BatchSize rows.
func NewRecordDepthHistory(pool *pgxpool.Pool, svc *service.Service) *RecordDepthHistory {
	return &RecordDepthHistory{Config: Config{Period: 20 * time.Second, Timeout: 30 * time.Second, BatchSize: BatchSize},
		deps: newDeps(pool, svc)}
}

// RunOnce records and prunes if it is this node's turn.
func (j *RecordDepthHistory) RunOnce(ctx context.Context) error {
	turn, err := j.q.JobTakeTurn(ctx, db.JobTakeTurnParams{Now: j.now(), Job: "depth_history",
		PeriodSeconds: int32(service.DepthHistoryPeriod / time.Second)})
	if err != nil || !turn {
		return failed("record depth history", err)
	}
	if _, err := j.q.DepthHistoryRecord(ctx, maxGaugeQueues); err != nil {
		return failed("record depth history", err)
	}
	before := j.nowOr(time.Now()).Add(-service.DepthHistoryKept)
	if _, err := j.q.DepthSnapshotsPrune(ctx, before); err != nil {
		return failed("prune depth history", err)
	}
	for range depthPruneBatches {
		n, err := j.q.DepthHistoryPrune(ctx, db.DepthHistoryPruneParams{Before: before, MaxRows: int32(j.BatchSize)})
		if err != nil {
			return failed("prune depth history", err)
		}
		if n < int64(j.BatchSize) {
			break
		}
	}
	return nil
}
