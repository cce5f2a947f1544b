package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// The nack, the dead-letter move and the requeue are PL/pgSQL functions
// (internal/migrations/current/functions/message_nack.sql,
// message_dead_letter.sql, message_requeue.sql) shared
// with the SQL consumer API. Like MessageInsert, their calls are written by
// hand because sqlc cannot see the columns of a function that returns a
// table; each row type lists its statement's columns in order, as
// pgx.RowToStructByPos reads them.

// MessageNackParams name deliveries by their receipts' parts.
type MessageNackParams struct {
	Now       *time.Time
	QueueIds  []int64
	Sequences []int64
	Tokens    [][]byte
	// Reasons are the nacks' reasons, one per delivery (nil: none).
	Reasons               []*string
	ServerMaxReceiveCount int32
	// KeyIds are the API keys of the nacks, one per delivery (0 or nil:
	// none), for the messages' history; every statement's array of key ids
	// reads 0 as none.
	KeyIds []int64
}

// MessageNackRow is one delivery the nack settled: its message is available
// again in its queue (MovedTo nil, not Discarded), or was dead-lettered to
// MovedTo, or discarded.
type MessageNackRow struct {
	QueueID   int64
	Sequence  int64
	Token     []byte
	MovedTo   *int64
	Discarded bool
}

const messageNack = `-- name: MessageNack :many
SELECT queue_id, sequence, token, moved_to, discarded FROM skipq.message_nack($1, $2, $3, $4, $5, $6, array_replace($7::bigint[], 0, NULL))`

// MessageNack calls skipq.message_nack.
func (q *Queries) MessageNack(ctx context.Context, arg MessageNackParams) ([]MessageNackRow, error) {
	rows, err := q.db.Query(ctx, messageNack, arg.Now, arg.QueueIds, arg.Sequences, arg.Tokens, arg.Reasons,
		arg.ServerMaxReceiveCount, arg.KeyIds)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[MessageNackRow])
}

// MessageDeadLetterParams name locked messages that used up their
// deliveries.
type MessageDeadLetterParams struct {
	Now                   *time.Time
	QueueIds              []int64
	Sequences             []int64
	ServerMaxReceiveCount int32
	KeyIds                []int64 // as MessageNackParams'
}

// MessageDeadLetterRow is one message moved (DeadLetterQueueID set) or
// discarded.
type MessageDeadLetterRow struct {
	SourceQueueID       int64
	SourceSequence      int64
	Tenant              string
	DeadLetterQueueID   *int64
	DeadLetterQueueName *string
}

const messageDeadLetter = `-- name: MessageDeadLetter :many
SELECT source_queue_id, source_sequence, tenant, dead_letter_queue_id, dead_letter_queue_name
FROM skipq.message_dead_letter($1, $2, $3, $4, array_replace($5::bigint[], 0, NULL))`

// MessageDeadLetter calls skipq.message_dead_letter, which also creates the
// missing dead-letter queues.
func (q *Queries) MessageDeadLetter(ctx context.Context, arg MessageDeadLetterParams) ([]MessageDeadLetterRow, error) {
	rows, err := q.db.Query(ctx, messageDeadLetter, arg.Now, arg.QueueIds, arg.Sequences, arg.ServerMaxReceiveCount,
		arg.KeyIds)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[MessageDeadLetterRow])
}

// MessageRequeueParams name deliveries to move to ToQueue, in each
// message's own tenant.
type MessageRequeueParams struct {
	Now                   *time.Time
	QueueIds              []int64
	Sequences             []int64
	Tokens                [][]byte
	ToQueue               string
	ServerMaxReceiveCount int32
	KeyIds                []int64 // as MessageNackParams'
}

// MessageRequeueRow is one delivery moved, and the queue it went to.
type MessageRequeueRow struct {
	SourceQueueID      int64
	SourceSequence     int64
	SourceToken        []byte
	DestinationQueueID int64
}

const messageRequeue = `-- name: MessageRequeue :many
SELECT source_queue_id, source_sequence, source_token, destination_queue_id
FROM skipq.message_requeue($1, $2, $3, $4, $5, $6, array_replace($7::bigint[], 0, NULL))`

// MessageRequeue calls skipq.message_requeue, which also creates the
// destination where it is missing.
func (q *Queries) MessageRequeue(ctx context.Context, arg MessageRequeueParams) ([]MessageRequeueRow, error) {
	rows, err := q.db.Query(ctx, messageRequeue, arg.Now, arg.QueueIds, arg.Sequences, arg.Tokens, arg.ToQueue,
		arg.ServerMaxReceiveCount, arg.KeyIds)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[MessageRequeueRow])
}
