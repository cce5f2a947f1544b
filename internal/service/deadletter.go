package service

import (
	"context"

	"github.com/skipq/skipq/internal/db"
)

// deadLetter moves the given (locked) messages to their dead-letter queues,
// creating missing ones, or discards those without one
// (skipq.message_dead_letter). It runs inside the caller's transaction (a
// worker batch's) and returns one row per message moved or discarded.
func (s *Service) deadLetter(ctx context.Context, q *db.Queries, queueIDs, sequences []int64) ([]db.MessageDeadLetterRow, error) {
	if len(queueIDs) == 0 {
		return nil, nil
	}
	return q.MessageDeadLetter(ctx, db.MessageDeadLetterParams{
		Now: s.now(), QueueIds: queueIDs, Sequences: sequences,
		ServerMaxReceiveCount: int32(s.limits.MaxReceiveCount)})
}

// deadLetterArrivals counts the messages each dead-letter queue received.
func deadLetterArrivals(moves []db.MessageDeadLetterRow) map[int64]int {
	received := map[int64]int{}
	for _, r := range moves {
		if r.DeadLetterQueueID != nil {
			received[*r.DeadLetterQueueID]++
		}
	}
	return received
}

// observeMoves reports dead-lettered and discarded messages by source queue
// (the move returns the source's tenant; its name comes from the cache).
func (s *Service) observeMoves(moves []db.MessageDeadLetterRow) {
	moved, discarded := map[int64]int{}, map[int64]int{}
	for _, r := range moves {
		if r.DeadLetterQueueID != nil {
			moved[r.SourceQueueID]++
		} else {
			discarded[r.SourceQueueID]++
		}
	}
	ctx := context.Background()
	s.observeByID(ctx, moved, s.obs.MessagesDeadLettered)
	s.observeByID(ctx, discarded, func(tenant, queue string, n int) {
		s.obs.MessagesDiscarded(tenant, queue, DiscardMaxReceives, n)
	})
}

// deadLetterSources are the queues messages were dead-lettered from.
func deadLetterSources(moves []db.MessageDeadLetterRow) map[int64]bool {
	sources := map[int64]bool{}
	for _, r := range moves {
		sources[r.SourceQueueID] = true
	}
	return sources
}
