package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/skipq/skipq/internal/db"
)

// Message history (docs/API.md#history). A queue with Trace on gives each message
// sent to it a trace id (in its tags under the reserved key "skipq.trace",
// which no message object shows); every statement that
// changes a traced message records an event in skipq.message_events in the
// same statement (internal/migrations/00030_message_history.sql). The trace id moves
// with the message, so the history of a dead letter or a redriven message
// goes on in its new queue.

// HistoryEvent is one event of a message's life. The pointer fields belong
// to some types only (wire.HistoryEvent lists which).
type HistoryEvent struct {
	Type         string
	At           time.Time
	Queue        string // where it happened; "" if that queue was deleted since
	MessageID    string // the message's id there
	KeyID        *int64 // the API key of the request; nil for the worker's and the SQL API's
	ReceiveCount *int
	VisibleUntil *time.Time
	Reason       *string
	Cause        *string
	ToQueue      *string
	NewMessageID *string
}

// HistoryKeepSeconds is how long a message's history outlives it.
const HistoryKeepSeconds = 24 * 60 * 60

// maxHistoryEvents bounds one history answer: a message nacked or extended
// without end would otherwise make it unbounded.
const maxHistoryEvents = 10_000

// keyIDKey is the context key of the calling API key's id.
type keyIDKey struct{}

// WithKeyID returns ctx naming the API key a request came with (0: none,
// as with auth off), recorded in the history of the messages it changes.
func WithKeyID(ctx context.Context, id int64) context.Context {
	if id == 0 {
		return ctx
	}
	return context.WithValue(ctx, keyIDKey{}, id)
}

// keyIDOf is the request's API key id, nil without one.
func keyIDOf(ctx context.Context) *int64 {
	if id, ok := ctx.Value(keyIDKey{}).(int64); ok {
		return &id
	}
	return nil
}

// orZero is a key id as the statements' arrays of key ids carry it: 0 for
// none (they read 0 as NULL).
func orZero(id *int64) int64 {
	if id == nil {
		return 0
	}
	return *id
}

// MessageHistory returns a message's events, oldest first: none for an
// existing message that is not traced, NotFound for a message that never
// existed in the queue or whose history was pruned (HistoryKeepSeconds
// after it was gone).
func (s *Service) MessageHistory(ctx context.Context, tenant, queue, messageID string) ([]HistoryEvent, error) {
	q, err := s.operatedQueue(ctx, tenant, queue, messageID)
	if err != nil {
		return nil, err
	}
	trace, err := s.q.MessageTraceOf(ctx, db.MessageTraceOfParams{QueueID: q.ID, MessageID: messageID})
	if errors.Is(db.NotFound(err), db.ErrNotFound) {
		return nil, notFound("message %q is not in queue %q", messageID, queue)
	}
	if err != nil {
		return nil, fromDB("message history", err)
	}
	if trace.TraceID == "" {
		return []HistoryEvent{}, nil
	}
	id, err := strconv.ParseInt(trace.TraceID, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("message history: trace id %q: %w", trace.TraceID, err)
	}
	rows, err := s.q.MessageEventsOfTrace(ctx, db.MessageEventsOfTraceParams{TraceID: id, MaxEvents: maxHistoryEvents})
	if err != nil {
		return nil, fromDB("message history", err)
	}
	events := make([]HistoryEvent, len(rows))
	for i, r := range rows {
		e := HistoryEvent{Type: r.Type, At: r.At, Queue: r.Queue, MessageID: r.MessageID, KeyID: r.KeyID}
		if len(r.Detail) > 0 {
			var d struct {
				ReceiveCount *int       `json:"receiveCount"`
				VisibleUntil *time.Time `json:"visibleUntil"`
				Reason       *string    `json:"reason"`
				Cause        *string    `json:"cause"`
				ToQueue      *string    `json:"toQueue"`
				NewMessageID *string    `json:"newMessageId"`
			}
			if err := json.Unmarshal(r.Detail, &d); err != nil {
				return nil, fmt.Errorf("message history: event detail: %w", err)
			}
			e.ReceiveCount, e.VisibleUntil, e.Reason = d.ReceiveCount, d.VisibleUntil, d.Reason
			e.Cause, e.ToQueue, e.NewMessageID = d.Cause, d.ToQueue, d.NewMessageID
		}
		events[i] = e
	}
	return events, nil
}
