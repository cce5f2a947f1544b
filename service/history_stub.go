package service

import (
	"context"
	"time"
)

// This file stands in for the lead's message history (SPEC §16.5) so that
// the console builds on the hist branch; the merge replaces it with the
// real service, whose signature and type it copies.

// HistoryEvent is one event of a traced message's life.
type HistoryEvent struct {
	Type                                 string
	At                                   time.Time
	Queue, MessageID                     string
	KeyID                                *int64
	ReceiveCount                         *int
	VisibleUntil                         *time.Time
	Reason, Cause, ToQueue, NewMessageID *string
}

// MessageHistory returns a message's events, oldest first.
func (s *Service) MessageHistory(ctx context.Context, tenant, queue, messageID string) ([]HistoryEvent, error) {
	return nil, nil
}
