package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// MessageClaimQueuesParams are the claims of several queues made in one
// statement: claim i takes up to MaxMessages[i] of Queues[i] (of
// Tenants[i]) for VisibilitySeconds[i] (nil: the queue's default) under
// KeyIDs[i], within MaxResponseBytes[i] with MessageOverheads[i] a message,
// at most one message of a FIFO group, all at Now.
type MessageClaimQueuesParams struct {
	Now               *time.Time
	Tenants           []string
	Queues            []string
	MaxMessages       []int32
	VisibilitySeconds []*int32
	KeyIDs            []*int64
	MaxResponseBytes  []int64
	MessageOverheads  []int64
}

// ClaimedMessage is a message one of MessageClaimQueues's claims took:
// Claim is its 1-based index among the params' claims.
type ClaimedMessage struct {
	Claim   int32
	Message SkipqMessage
}

// MessageClaimQueues runs skipq.message_claim
// (internal/migrations/current/functions/message_claim.sql) once for each
// of several queues, in one statement and one commit, and hands a topic
// copy out with its stored body in place (the tag that names the body
// dropped, as the node would after reading it with TopicBodies). A publish
// to a topic wakes a receiver on each of its groups at once: one statement
// for all their claims costs one round trip and one commit where a claim
// per queue cost one each, and the bodies come along instead of in a read
// per receive. Rows come in claim order, each claim's in answer order.
// Written by hand: the claim's rows are read beside their claim's index.
func (q *Queries) MessageClaimQueues(ctx context.Context, arg MessageClaimQueuesParams) ([]ClaimedMessage, error) {
	rows, err := q.db.Query(ctx, messageClaimQueues, arg.Now, arg.Tenants, arg.Queues, arg.MaxMessages,
		arg.VisibilitySeconds, arg.KeyIDs, arg.MaxResponseBytes, arg.MessageOverheads)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ClaimedMessage, error) {
		var c ClaimedMessage
		m := &c.Message
		err := row.Scan(&c.Claim, &m.QueueID, &m.Sequence, &m.MessageID, &m.ClientID, &m.Metadata, &m.Body,
			&m.BodyBinary, &m.Tags, &m.SentAt, &m.VisibleAt, &m.DelayedTo, &m.ExpiresAt, &m.ReceiveCount,
			&m.FirstReceivedAt, &m.MaxReceiveCount, &m.DeadLetterQueue, &m.ReRoutedFrom, &m.DeadLetteredAt,
			&m.LeaseToken, &m.Ready, &m.GroupID)
		return c, err
	})
}

// The body is looked up only for a copy (one primary-key probe of
// skipq.topic_bodies); a copy whose body is gone keeps its tag and its
// empty body, as TopicBodies would leave it.
const messageClaimQueues = `-- name: MessageClaimQueues :many
SELECT k.claim::integer, m.queue_id, m.sequence, m.message_id, m.client_id, m.metadata,
       coalesce(b.body, m.body), m.body_binary, CASE WHEN b.body IS NULL THEN m.tags ELSE m.tags - 'skipq.body' END,
       m.sent_at, m.visible_at, m.delayed_to, m.expires_at, m.receive_count, m.first_received_at,
       m.max_receive_count, m.dead_letter_queue, m.re_routed_from, m.dead_lettered_at, m.lease_token, m.ready,
       m.group_id
FROM unnest($2::text[], $3::text[], $4::integer[], $5::integer[], $6::bigint[], $7::bigint[], $8::bigint[])
         WITH ORDINALITY AS k(tenant, queue, max_messages, visibility_seconds, key_id, max_response_bytes,
                              message_overhead, claim)
CROSS JOIN LATERAL skipq.message_claim(k.tenant, k.queue, $1::timestamptz, k.visibility_seconds, k.max_messages,
    k.max_response_bytes, k.message_overhead, k.key_id, 1, 'claim') WITH ORDINALITY AS m
LEFT JOIN LATERAL (SELECT d.body FROM skipq.topic_bodies d
                   WHERE m.tags ? 'skipq.body' AND d.id = (m.tags ->> 'skipq.body')::bigint) b ON true
ORDER BY k.claim, m.ordinality`
