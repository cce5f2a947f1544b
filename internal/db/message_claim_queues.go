package db

import (
	"context"
	"time"
)

// MessageClaimQueuesParams are the claims of several queues made in one
// statement: claim i takes up to MaxMessages[i] of Queues[i] (of
// Tenants[i]) for VisibilitySeconds[i] (nil: the queue's default) under
// KeyIDs[i], within MaxResponseBytes[i] with MessageOverheads[i] a message,
// in mode Modes[i] (skipq.message_claim's 'claim' or 'claim_pending_first';
// Modes nil: 'claim'), at most one message of a FIFO group, all at Now.
type MessageClaimQueuesParams struct {
	Now               *time.Time
	Tenants           []string
	Queues            []string
	MaxMessages       []int32
	VisibilitySeconds []*int32
	KeyIDs            []*int64
	MaxResponseBytes  []int64
	MessageOverheads  []int64
	Modes             []string
}

// ClaimedMessage is a message one of MessageClaimQueues's claims took:
// Claim is its 1-based index among the params' claims.
type ClaimedMessage struct {
	Claim   int32
	Message SkipqMessage
}

// MessageClaimQueues calls skipq.message_claim_queues
// (internal/migrations/current/functions/message_claim_queues.sql): the
// claims of several queues in one statement and one commit, a topic copy
// handed out with its stored body in place (the tag that names the body
// dropped, as the node would after reading it with TopicBodies). A publish
// to a topic wakes a receiver on each of its groups at once: one statement
// for all their claims costs one round trip and one commit where a claim
// per queue cost one each, and the bodies come along instead of in a read
// per receive. Each claim's rows come in answer order; the claims' rows
// need not come in claim order (the pending-first claims of topic groups,
// made together, come first), so read Claim.
// Written by hand: sqlc cannot see the columns of a function that returns
// a table. Its rows are read as MessageClaim's (scanMessages).
//
// Like MessageClaim, it is made once more after it failed on a topic
// copy's id (copyIDTaken).
func (q *Queries) MessageClaimQueues(ctx context.Context, arg MessageClaimQueuesParams) ([]ClaimedMessage, error) {
	claimed, err := q.messageClaimQueues(ctx, arg)
	if copyIDTaken(err) && !q.inTransaction() {
		claimed, err = q.messageClaimQueues(ctx, arg)
	}
	return claimed, err
}

func (q *Queries) messageClaimQueues(ctx context.Context, arg MessageClaimQueuesParams) ([]ClaimedMessage, error) {
	rows, err := q.db.Query(ctx, messageClaimQueues, arg.Now, arg.Tenants, arg.Queues, arg.MaxMessages,
		arg.VisibilitySeconds, arg.KeyIDs, arg.MaxResponseBytes, arg.MessageOverheads, arg.Modes)
	if err != nil {
		return nil, err
	}
	hint := 0
	for _, n := range arg.MaxMessages {
		hint += int(n)
	}
	var claims []int32
	msgs, err := scanMessages(rows, hint, &claims)
	if err != nil {
		return nil, err
	}
	out := make([]ClaimedMessage, len(msgs))
	for i := range msgs {
		out[i] = ClaimedMessage{Claim: claims[i], Message: msgs[i]}
	}
	return out, nil
}

const messageClaimQueues = `-- name: MessageClaimQueues :many
SELECT claim, ` + messageColumns + `
FROM skipq.message_claim_queues($1, $2, $3, $4, $5, $6, $7, $8, $9)`
