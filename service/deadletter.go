package service

import (
	"context"
	"slices"

	"github.com/skipq/skipq/db"
)

// deadLetterKey names a message that used up its deliveries.
type deadLetterKey struct {
	queueID         int64
	sequence        int64
	deadLetterQueue string
}

// deadLetter moves the given (locked) messages to their dead-letter queues,
// creating missing ones, or discards those without one. It runs inside the
// caller's transaction (a nack's, or a worker batch's) and returns one row
// per message moved or discarded.
func (s *Service) deadLetter(ctx context.Context, q *db.Queries, keys []deadLetterKey) ([]db.MessageDeadLetterRow, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	queueIDs := make([]int64, len(keys))
	sequences := make([]int64, len(keys))
	for i, k := range keys {
		queueIDs[i], sequences[i] = k.queueID, k.sequence
	}
	if err := s.createDeadLetterQueues(ctx, q, keys); err != nil {
		return nil, err
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

// createDeadLetterQueues creates the missing dead-letter queues, tenant by
// tenant (a message's dead-letter queue lives in its own tenant).
func (s *Service) createDeadLetterQueues(ctx context.Context, q *db.Queries, keys []deadLetterKey) error {
	var ids []int64
	for _, k := range keys {
		if k.deadLetterQueue != "" {
			ids = append(ids, k.queueID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	sources, err := q.QueueTenantsByID(ctx, slices.Compact(ids))
	if err != nil {
		return err
	}
	tenantOf := map[int64]string{}
	for _, src := range sources {
		tenantOf[src.ID] = src.Tenant
	}
	names := map[string][]string{}
	for _, k := range keys {
		if t, ok := tenantOf[k.queueID]; ok && k.deadLetterQueue != "" && !slices.Contains(names[t], k.deadLetterQueue) {
			names[t] = append(names[t], k.deadLetterQueue)
		}
	}
	for tenant, ns := range names {
		if err := q.QueueCreateMissing(ctx, db.QueueCreateMissingParams{Tenant: tenant, Names: ns}); err != nil {
			return err
		}
	}
	return nil
}
