package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// TopicPublish calls skipq.topic_publish
// (internal/migrations/current/functions/topic_publish.sql): a send's
// messages, in MessageInsert's arrays, published to the topic arg.Queue
// names. Written by hand for the reason MessageInsert is. No rows: the
// topic does not exist.
func (q *Queries) TopicPublish(ctx context.Context, arg MessageInsertParams) ([]TopicPublishRow, error) {
	rows, err := q.db.Query(ctx, topicPublish,
		arg.Tenant, arg.Queue, arg.Now, arg.ServerMaxReceiveCount,
		arg.MessageIds, arg.Keyed, arg.ClientIds, arg.Metadatas, arg.BodyBinaries, arg.Tags,
		arg.DelaySeconds, arg.ExpirationSeconds, arg.MaxReceiveCounts,
		arg.DeadLetterQueues, arg.DeadLetterQueueGiven, arg.BodyOffsets, arg.BodyLengths, arg.BodyData, arg.GroupIds,
		arg.KeyIds)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[TopicPublishRow])
}

const topicPublish = `-- name: TopicPublish :many
SELECT pos, message_id, outcome, delivered_to, published_at, woken
FROM skipq.topic_publish($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)`

// TopicPublishRow is one position's outcome (Pos is 1-based): an
// Outcome of MessageInsert's, the number of groups the message reached
// (a duplicate's: the first publish's), when it was published, and the
// queues where its copy is available now.
type TopicPublishRow struct {
	Pos         int32
	MessageID   string
	Outcome     string
	DeliveredTo int32
	PublishedAt *time.Time
	Woken       []int64
}

// TopicReplay calls skipq.topic_replay
// (internal/migrations/current/functions/topic_replay.sql): one step of one
// subscription's replay of its topic's retained messages, up to maxMessages
// of them. No row: no subscription replays (or the others are taken).
// Written by hand: sqlc cannot see the columns of a function that returns a
// table.
func (q *Queries) TopicReplay(ctx context.Context, maxMessages int32) ([]TopicReplayRow, error) {
	rows, err := q.db.Query(ctx, topicReplay, maxMessages)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[TopicReplayRow])
}

const topicReplay = `-- name: TopicReplay :many
SELECT queue_id, copied, available, more FROM skipq.topic_replay($1)`

// TopicReplayRow is a replay step: the subscribed queue, how many copies it
// got and how many of them are available now, and whether the replay goes
// on (false: the subscription is live).
type TopicReplayRow struct {
	QueueID   int64
	Copied    int32
	Available int32
	More      bool
}
