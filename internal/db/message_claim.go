package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// MessageClaimParams are one receive's claim: up to MaxMessages messages
// of Queue (of Tenant) within MaxResponseBytes, each counted with
// MessageOverhead, at most MaxPerGroup of a FIFO group. Mode: "claim"
// leases them for VisibilitySeconds (nil: the queue's default),
// "claim_pending_first" too, taking a topic group's pending copies before
// its ready messages, "delete" is autoAck (receive_count reported as it was before this delivery),
// "peek" reads them unchanged. Now and KeyID may be nil (the clock, no
// API key).
type MessageClaimParams struct {
	Tenant            string
	Queue             string
	Now               *time.Time
	VisibilitySeconds *int32
	MaxMessages       int32
	MaxResponseBytes  int64
	MessageOverhead   int64
	KeyID             *int64
	MaxPerGroup       int32
	Mode              string
}

// MessageClaim is a receive of any queue, the one claim statement: its
// messages in answer order (a standard queue's by sequence, a FIFO queue's
// groups in rotation). skipq.message_claim
// (internal/migrations/current/functions/message_claim.sql) looks the
// queue up and runs the claim of its kind. Written by hand, not by sqlc,
// for its rows: scanMessages reads them with a few allocations a claim
// where pgx's Scan made one for every string, body and nullable time of
// every row.
//
// A claim that failed because a topic copy it made met its id, inserted by
// a transaction that committed while the claim ran (copyIDTaken), is made
// once more unless it ran in the caller's transaction, which the failure
// aborted: nothing was claimed, and the claim made again sees the id and
// gives the copy a fresh one.
func (q *Queries) MessageClaim(ctx context.Context, arg MessageClaimParams) ([]SkipqMessage, error) {
	msgs, err := q.messageClaim(ctx, arg)
	if copyIDTaken(err) && !q.inTransaction() {
		msgs, err = q.messageClaim(ctx, arg)
	}
	return msgs, err
}

func (q *Queries) messageClaim(ctx context.Context, arg MessageClaimParams) ([]SkipqMessage, error) {
	rows, err := q.db.Query(ctx, messageClaim, arg.Tenant, arg.Queue, arg.Now, arg.VisibilitySeconds,
		arg.MaxMessages, arg.MaxResponseBytes, arg.MessageOverhead, arg.KeyID, arg.MaxPerGroup, arg.Mode)
	if err != nil {
		return nil, err
	}
	return scanMessages(rows, int(arg.MaxMessages), nil)
}

// copyIDTaken reports whether a claim failed on the unique message id of a
// topic copy it made (skipq.topic_copies_make): a message of that id was
// inserted into the group by a transaction the claim's probe did not see
// and that committed before the copy's insert.
func copyIDTaken(err error) bool {
	return IsUniqueViolation(err, "messages_message_id_queue_key")
}

// inTransaction reports whether q runs in a transaction of its caller's
// (WithTx), not statement by statement.
func (q *Queries) inTransaction() bool {
	_, ok := q.db.(pgx.Tx)
	return ok
}

// The "-- name:" line labels the statement in pg_stat_statements as sqlc's
// do (skipq-bench reports statements by it).
const messageClaim = `-- name: MessageClaim :many
SELECT ` + messageColumns + `
FROM skipq.message_claim($1::text, $2::text, $3::timestamptz, $4::integer, $5::integer, $6::bigint,
    $7::bigint, $8::bigint, $9::integer, $10::text)`
