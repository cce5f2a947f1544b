package service

import (
	"context"
	"errors"
	"slices"

	"github.com/skipq/skipq/internal/db"
)

// BatchEntry is one message's outcome in a send that is not all or
// nothing (docs/API.md#send): its result, or Err when it was not stored.
type BatchEntry struct {
	Result SendResult
	Err    *Error
}

// noPath puts a message's issues at paths relative to the message itself.
func noPath(int) string { return "" }

// SendEach sends a batch message by message (docs/API.md#send, "atomic": false):
// every valid message is stored, in one transaction, and each invalid or
// refused one answers its own error, with issue paths relative to it.
// Results are in input order. unread[i], when not nil, is why message i
// could not be read (the caller's decoding): it is not sent and answers
// that issue. Limits of the request as a whole (batch size,
// distinct groups, queue name) and failures of the database fail the whole
// request, as for SendBatch.
//
// What only the database finds -- a key sent before with other content, a
// FIFO group rule, an id held by a moved message -- makes the statement
// store nothing and name the positions at fault; those get their errors
// and the rest go again. Every round takes at least one message out, so it
// ends.
func (s *Service) SendEach(ctx context.Context, tenant, queue string, in []MessageInput, unread []*Issue) ([]BatchEntry, error) {
	if err := checkBatch(in); err != nil {
		return nil, err
	}
	if err := checkQueueName("queue", queue); err != nil {
		return nil, err
	}
	out := make([]BatchEntry, len(in))
	var msgs []prepared
	var at []int // at[j] is msgs[j]'s position in the request
	for i, m := range in {
		if i < len(unread) && unread[i] != nil {
			out[i].Err = Invalid(*unread[i])
			continue
		}
		p, err := s.prepare(queue, []MessageInput{m}, noPath)
		var e *Error
		switch {
		case errors.As(err, &e) && (e.Kind == KindInvalid || e.Kind == KindTooLarge):
			out[i].Err = e
		case err != nil:
			return nil, err
		default:
			msgs, at = append(msgs, p[0]), append(at, i)
		}
	}
	for vanished := 0; len(msgs) > 0; {
		call, err := s.store(ctx, tenant, queue, msgs, noPath, createMissing)
		if err != nil {
			return nil, err
		}
		var refused []refusal
		switch {
		case len(call.refused) > 0:
			// A later position of a key is judged against the key's first
			// position; when that one is refused, the later ones go again
			// and are judged against what is stored.
			first := map[string]bool{}
			for _, r := range call.refused {
				if id := msgs[r.pos].MessageID; r.err.Kind == KindIdempotencyConflict {
					if first[id] {
						continue
					}
					first[id] = true
				}
				refused = append(refused, r)
			}
		case db.IsUniqueViolation(call.err, "messages_message_id_queue_key"):
			if refused, err = s.heldIDs(ctx, tenant, queue, msgs, call.err); err != nil {
				return nil, err
			}
			if len(refused) == 0 {
				// The moved message left before we looked: go again,
				// a few times at most.
				if vanished++; vanished == sendAttempts {
					return nil, call.err
				}
				continue
			}
		case call.err != nil:
			return nil, call.err
		default:
			for j, r := range call.results {
				out[at[j]].Result = r
			}
			return out, nil
		}
		for _, r := range refused {
			out[at[r.pos]].Err = r.err
		}
		kept := 0
		for j := range msgs {
			if out[at[j]].Err == nil {
				msgs[kept], at[kept] = msgs[j], at[j]
				kept++
			}
		}
		msgs, at = msgs[:kept], at[:kept]
	}
	return out, nil
}

// heldIDs are the refusals of the messages whose id a message moved into
// the queue holds (the statement failed on the unique index and does not
// say which).
func (s *Service) heldIDs(ctx context.Context, tenant, queue string, msgs []prepared, cause error) ([]refusal, error) {
	ids := make([]string, len(msgs))
	for j, m := range msgs {
		ids[j] = m.MessageID
	}
	held, err := s.q.MessageIDsHeld(ctx, db.MessageIDsHeldParams{Tenant: tenant, Queue: queue, MessageIds: ids})
	if err != nil {
		return nil, fromDB("send", err)
	}
	var refused []refusal
	for j, id := range ids {
		if slices.Contains(held, id) {
			refused = append(refused, refusal{j, heldConflict("messageId", cause)})
		}
	}
	return refused, nil
}
