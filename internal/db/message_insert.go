package db

import (
	"context"
	"time"
)

// MessageInsert calls skipq.message_insert
// (internal/migrations/current/functions/message_insert.sql), the one
// implementation of a send after validation, shared with the SQL API's
// skipq.send. It is written by hand because sqlc cannot see the columns of
// a function that returns a table: the statement is one call, and the
// function carries its own plan settings, so it runs direct (route.go).
func (q *Queries) MessageInsert(ctx context.Context, arg MessageInsertParams) ([]MessageInsertRow, error) {
	rows, err := q.db.Query(ctx, messageInsert,
		arg.Tenant, arg.Queue, arg.Now, arg.ServerMaxReceiveCount,
		arg.MessageIds, arg.Keyed, arg.ClientIds, arg.Metadatas, arg.BodyBinaries, arg.Tags,
		arg.DelaySeconds, arg.ExpirationSeconds, arg.MaxReceiveCounts,
		arg.DeadLetterQueues, arg.DeadLetterQueueGiven, arg.BodyOffsets, arg.BodyLengths, arg.BodyData, arg.GroupIds, arg.DedupIds,
		arg.KeyIds)
	if err != nil {
		return nil, err
	}
	// Scanned field by field into rows made once, not through
	// pgx.RowToStructByPos: its reflection over each row and the slice's
	// growth were most of the driver's cost of a send of 100 in the node.
	defer rows.Close()
	out := make([]MessageInsertRow, 0, len(arg.MessageIds))
	for rows.Next() {
		var r MessageInsertRow
		if err := rows.Scan(&r.Pos, &r.QueueID, &r.MessageID, &r.Sequence, &r.SentAt, &r.DelayedTo, &r.ExpiresAt, &r.Outcome); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// The "-- name:" line labels the statement in pg_stat_statements as sqlc's
// do (skipq-bench reports statements by it).
const messageInsert = `-- name: MessageInsert :many
SELECT pos, queue_id, message_id, sequence, sent_at, delayed_to, expires_at, outcome
FROM skipq.message_insert($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, array_replace($21::bigint[], 0, NULL))`

// MessageInsertParams are one send's messages, one array element each.
// DelaySeconds and ExpirationSeconds of -1, MaxReceiveCounts of 0 and
// DeadLetterQueueGiven false take the queue's defaults. Keyed marks the
// messages whose MessageIds are idempotency keys (given by the client).
// Bodies are BodyData cut at BodyOffsets (1-based) and BodyLengths.
// GroupIds is nil for a standard queue's messages, one group each for a
// FIFO queue's. DedupIds is nil, or one SQS MessageDeduplicationId (or nil)
// per message. KeyIds is nil, or the API key (0: none) that sent each
// message, for its history; like every statement's array of key ids, the
// statement reads 0 as none.
type MessageInsertParams struct {
	Tenant                string
	Queue                 string
	Now                   *time.Time
	ServerMaxReceiveCount int32
	MessageIds            []string
	Keyed                 []bool
	ClientIds             []string
	Metadatas             []string
	BodyBinaries          []bool
	Tags                  []string
	DelaySeconds          []int32
	ExpirationSeconds     []int32
	MaxReceiveCounts      []int32
	DeadLetterQueues      []string
	DeadLetterQueueGiven  []bool
	BodyOffsets           []int32
	BodyLengths           []int32
	BodyData              []byte
	GroupIds              []*string
	DedupIds              []*string
	KeyIds                []int64
}

// Outcomes of one position of a MessageInsert.
const (
	OutcomeSent      = "sent"
	OutcomeDuplicate = "duplicate"
	OutcomeConflict  = "conflict"
	// The queue is FIFO and the message has no group, or it is standard
	// and the message has one: nothing was inserted.
	OutcomeGroupRequired = "group_required"
	OutcomeGroupRefused  = "group_refused"
)

// MessageInsertRow is one position's outcome (Pos is 1-based); its fields
// are messageInsert's columns in order. A conflict
// carries only its position, queue and id; nothing was inserted.
type MessageInsertRow struct {
	Pos       int32
	QueueID   int64
	MessageID string
	Sequence  *int64
	SentAt    *time.Time
	DelayedTo *time.Time
	ExpiresAt *time.Time
	Outcome   string
}
