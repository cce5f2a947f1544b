package service

import (
	"context"

	"github.com/skipq/skipq/internal/db"
)

// QueueSpan is what a queue's messages occupy beside their counts (KubeMQ's
// QueuesInfo): the bytes of their bodies and metadata, and their first and
// last sequence (0 when the queue holds none). It covers the messages
// QueueStats counts as available, delayed or in flight.
type QueueSpan struct {
	Bytes         int64
	FirstSequence int64
	LastSequence  int64
}

// QueueSpan reads a queue's span at request time (one scan of its rows, as
// GetQueue's stats).
func (s *Service) QueueSpan(ctx context.Context, tenant, name string) (QueueSpan, error) {
	if err := checkQueueName("queue", name); err != nil {
		return QueueSpan{}, err
	}
	row, err := s.queueByName(ctx, tenant, name)
	if err != nil {
		return QueueSpan{}, err
	}
	sp, err := s.q.QueueSpan(ctx, db.QueueSpanParams{QueueID: row.ID, Now: s.now()})
	if err != nil {
		return QueueSpan{}, fromDB("queue span", err)
	}
	return QueueSpan{Bytes: sp.Bytes, FirstSequence: sp.FirstSequence, LastSequence: sp.LastSequence}, nil
}
