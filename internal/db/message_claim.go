package db

import (
	"context"
	"time"
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
func (q *Queries) MessageClaim(ctx context.Context, arg MessageClaimParams) ([]SkipqMessage, error) {
	rows, err := q.db.Query(ctx, messageClaim, arg.Tenant, arg.Queue, arg.Now, arg.VisibilitySeconds,
		arg.MaxMessages, arg.MaxResponseBytes, arg.MessageOverhead, arg.KeyID, arg.MaxPerGroup, arg.Mode)
	if err != nil {
		return nil, err
	}
	return scanMessages(rows, int(arg.MaxMessages), nil)
}

// The "-- name:" line labels the statement in pg_stat_statements as sqlc's
// do (skipq-bench reports statements by it).
const messageClaim = `-- name: MessageClaim :many
SELECT ` + messageColumns + `
FROM skipq.message_claim($1::text, $2::text, $3::timestamptz, $4::integer, $5::integer, $6::bigint,
    $7::bigint, $8::bigint, $9::integer, $10::text)`
