package service

import (
	"context"
	"sync"
	"time"

	"github.com/skipq/skipq/internal/db"
)

// Observer is told what happened to messages, per queue (the node's metrics
// implement it). Calls are made after the change committed.
type Observer interface {
	MessagesSent(tenant, queue string, n int)
	MessagesReceived(tenant, queue string, n int)
	MessagesAcked(tenant, queue string, n int)
	MessagesNacked(tenant, queue string, n int)
	MessagesDeadLettered(tenant, queue string, n int)
	MessagesDiscarded(tenant, queue, reason string, n int)
	MessagesExpired(tenant, queue string, n int)
	// TopicPublished counts a publish's new messages, the copies the
	// groups got and the messages no group got.
	TopicPublished(tenant, topic string, published, delivered, unrouted int)
	// QueueCounts replaces the per-queue gauges with a fresh reading.
	QueueCounts(counts []QueueCount, now time.Time)
}

// QueueCount is one queue's current message counts.
type QueueCount struct {
	Tenant, Queue                string
	Available, Delayed, InFlight int64
	OldestAvailableAt            *time.Time
}

// DiscardMaxReceives is the discard reason of a message that used up its
// deliveries with no dead-letter queue.
const DiscardMaxReceives = "max_receive_count"

type nopObserver struct{}

func (nopObserver) MessagesSent(string, string, int)              {}
func (nopObserver) MessagesReceived(string, string, int)          {}
func (nopObserver) MessagesAcked(string, string, int)             {}
func (nopObserver) MessagesNacked(string, string, int)            {}
func (nopObserver) MessagesDeadLettered(string, string, int)      {}
func (nopObserver) MessagesDiscarded(string, string, string, int) {}
func (nopObserver) MessagesExpired(string, string, int)           {}
func (nopObserver) QueueCounts([]QueueCount, time.Time)           {}
func (nopObserver) TopicPublished(string, string, int, int, int)  {}

// queueName is a queue's tenant and name.
type queueName struct{ tenant, name string }

// queueNames remembers the names of queue ids this node has seen, so
// per-queue metrics of statements that return only ids (settling, worker
// sweeps) cost no query on the hot path. Ids are never reused and a queue
// id's name never changes, so entries never go stale; the map is cleared
// when it grows past its bound.
type queueNames struct {
	mu    sync.Mutex
	names map[int64]queueName
}

const queueNamesMax = 100000

func (c *queueNames) remember(id int64, tenant, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.names == nil || len(c.names) >= queueNamesMax {
		c.names = map[int64]queueName{}
	}
	c.names[id] = queueName{tenant, name}
}

// namesOf resolves queue ids, asking the database only for unknown ones.
// A lookup failure leaves those ids out (metrics are best effort).
func (s *Service) namesOf(ctx context.Context, ids map[int64]int) map[int64]queueName {
	out := make(map[int64]queueName, len(ids))
	var missing []int64
	s.names.mu.Lock()
	for id := range ids {
		if n, ok := s.names.names[id]; ok {
			out[id] = n
		} else {
			missing = append(missing, id)
		}
	}
	s.names.mu.Unlock()
	if len(missing) == 0 {
		return out
	}
	rows, err := s.q.QueueTenantsByID(context.WithoutCancel(ctx), missing)
	if err != nil {
		s.log.Warn("resolving queue names for metrics failed", "error", err)
		return out
	}
	for _, r := range rows {
		s.names.remember(r.ID, r.Tenant, r.Name)
		out[r.ID] = queueName{r.Tenant, r.Name}
	}
	return out
}

// observeByID reports per-queue counts keyed by queue id.
func (s *Service) observeByID(ctx context.Context, counts map[int64]int, report func(tenant, queue string, n int)) {
	if len(counts) == 0 {
		return
	}
	for id, name := range s.namesOf(ctx, counts) {
		report(name.tenant, name.name, counts[id])
	}
}

// What the worker's jobs (internal/worker) tell the service: they run their
// own statements, and report here what the observer must hear. (Wake-ups of
// waiting receivers go to Hub.)

// ObserveDeadLetters reports dead-lettered and discarded messages by source
// queue, the names coming from the service's cache: a nack's moves, and
// those of the worker's timers (internal/worker).
func (s *Service) ObserveDeadLetters(moves []db.MessageDeadLetterRow) {
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

// ObserveExpired reports expired messages removed, counted by queue id.
func (s *Service) ObserveExpired(ctx context.Context, byQueueID map[int64]int) {
	s.observeByID(ctx, byQueueID, s.obs.MessagesExpired)
}

// ObserveQueueCounts hands a fresh reading of the gauges to the observer.
func (s *Service) ObserveQueueCounts(counts []QueueCount) {
	s.obs.QueueCounts(counts, s.nowOr(time.Now()))
}
