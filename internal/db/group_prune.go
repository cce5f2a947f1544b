package db

import "context"

// GroupPruneParams are a window of skipq.message_groups: up to ScanGroups
// groups after the cursor (AfterQueueID, AfterGroupID; nil: the start), of
// which up to MaxGroups empty ones are pruned.
type GroupPruneParams struct {
	MaxGroups    int32
	ScanGroups   int32
	AfterQueueID *int64
	AfterGroupID *string
}

// GroupPruneRow is how many groups a call pruned and where the next goes
// on (nil: from the start).
type GroupPruneRow struct {
	Pruned      int32
	NextQueueID *int64
	NextGroupID *string
}

const groupPrune = `-- name: GroupPrune :one
SELECT pruned, next_queue_id, next_group_id FROM skipq.group_prune($1, $2, $3, $4)`

// GroupPrune calls skipq.group_prune, written by hand as sqlc cannot see
// the columns of a function with OUT parameters.
func (q *Queries) GroupPrune(ctx context.Context, arg GroupPruneParams) (GroupPruneRow, error) {
	var r GroupPruneRow
	err := q.db.QueryRow(ctx, groupPrune, arg.MaxGroups, arg.ScanGroups, arg.AfterQueueID, arg.AfterGroupID).
		Scan(&r.Pruned, &r.NextQueueID, &r.NextGroupID)
	return r, err
}
