package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Search's walk is a PL/pgSQL function, skipq.message_search_lifecycle_walk
// (internal/migrations/current/functions/message_search_lifecycle_walk.sql):
// it stops reading a queue once its matches are complete, which one SQL
// statement can only say with CTEs inside a LATERAL, and sqlc parses
// neither those nor a function's table. Written by hand as MessageInsert is;
// the row lists the function's columns in order, as pgx.RowToStructByPos
// reads them. MessageSearchByID returns the same columns.

// MessageSearchWalkParams are the filters, the cursor and the budgets of
// one walk.
type MessageSearchWalkParams struct {
	QueueIds      []int64
	States        []string
	Tags          []byte // a JSON object the tags must contain
	SentAfter     *time.Time
	SentBefore    *time.Time
	AfterSentAt   *time.Time
	AfterQueue    string
	AfterSequence int64
	Budget        int64 // index entries the whole walk may read, at least one per queue
	MaxMatches    int64
	Now           *time.Time
	GroupID       *string // nil: any group (or none)
}

// MessageSearchWalkRow is a match (Matched) or the last entry a queue's
// walk read before its share of the budget ran out (Exhausted).
type MessageSearchWalkRow struct {
	QueueID   int64
	QueueName string
	Sequence  int64
	SentAt    time.Time
	Matched   bool
	State     string
	Size      int64
	Exhausted bool
}

const messageSearchWalk = `-- name: MessageSearchWalk :many
SELECT queue_id, queue_name, sequence, sent_at, matched, state, size, exhausted
FROM skipq.message_search_lifecycle_walk($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`

// MessageSearchWalk calls skipq.message_search_lifecycle_walk.
func (q *Queries) MessageSearchWalk(ctx context.Context, arg MessageSearchWalkParams) ([]MessageSearchWalkRow, error) {
	rows, err := q.db.Query(ctx, messageSearchWalk, arg.QueueIds, arg.States, arg.Tags, arg.SentAfter,
		arg.SentBefore, arg.AfterSentAt, arg.AfterQueue, arg.AfterSequence, arg.Budget, arg.MaxMatches, arg.Now, arg.GroupID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[MessageSearchWalkRow])
}
