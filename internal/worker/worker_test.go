package worker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/testdb"
	"github.com/skipq/skipq/internal/worker"
)

// clock is a settable time for the service's SQL (no sleeping in tests).
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newService is a service on a fresh database, on a clock of its own; the
// jobs built on it and the pool share that clock.
func newService(t *testing.T) (*service.Service, *clock, *pgxpool.Pool) {
	t.Helper()
	return newObservedService(t, nil)
}

// ignoredObserver is an Observer that ignores everything: a test's
// observer embeds it and implements what it looks at.
type ignoredObserver struct{}

func (ignoredObserver) MessagesSent(string, string, int)              {}
func (ignoredObserver) MessagesReceived(string, string, int)          {}
func (ignoredObserver) MessagesAcked(string, string, int)             {}
func (ignoredObserver) MessagesNacked(string, string, int)            {}
func (ignoredObserver) MessagesDeadLettered(string, string, int)      {}
func (ignoredObserver) MessagesDiscarded(string, string, string, int) {}
func (ignoredObserver) MessagesExpired(string, string, int)           {}
func (ignoredObserver) QueueCounts([]service.QueueCount, time.Time)   {}
func (ignoredObserver) TopicPublished(string, string, int, int, int)  {}

func newObservedService(t *testing.T, obs service.Observer) (*service.Service, *clock, *pgxpool.Pool) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	clk := &clock{t: time.Now()}
	return service.New(pool, service.Options{Limits: service.DefaultLimits(), Clock: clk.now, Observer: obs}), clk, pool
}

// Two workers sweep the same backlog of expired last leases and expired
// messages at once: every message is moved or removed exactly once.
func TestConcurrentWorkersMoveEachMessageOnce(t *testing.T) {
	svc, clk, pool := newService(t)
	ctx := context.Background()
	const n = 2500
	dlq := "work.dlq"
	one := 1
	for i := 0; i < n; i += 500 {
		batch := make([]service.MessageInput, 500)
		for j := range batch {
			batch[j] = service.MessageInput{Body: fmt.Sprint(i + j), MaxReceiveCount: &one, DeadLetterQueue: &dlq}
		}
		if _, err := svc.SendBatch(ctx, "default", "work", batch); err != nil {
			t.Fatal(err)
		}
		expiring := make([]service.MessageInput, 500)
		exp := 10
		for j := range expiring {
			expiring[j] = service.MessageInput{Body: "e", ExpirationSeconds: &exp}
		}
		if _, err := svc.SendBatch(ctx, "default", "expiring", expiring); err != nil {
			t.Fatal(err)
		}
	}
	max, vis := 1024, 30
	for claimed := 0; claimed < n; {
		msgs, err := svc.Receive(ctx, "default", "work", service.ReceiveOptions{MaxMessages: &max, VisibilitySeconds: &vis, WaitSeconds: new(0)})
		if err != nil || len(msgs) == 0 {
			t.Fatalf("claimed %d of %d: %v", claimed, n, err)
		}
		claimed += len(msgs)
	}
	clk.advance(time.Minute) // every lease and every expiration has run out

	var wg sync.WaitGroup
	var mu sync.Mutex
	moved, removed := 0, 0
	for range 2 {
		fire, expire := worker.NewFireTimers(pool, svc), worker.NewRemoveExpired(pool, svc)
		fire.BatchSize, expire.BatchSize = 100, 100
		wg.Go(func() {
			for {
				m, err1 := fire.RunOnce(ctx)
				r, err2 := expire.RunOnce(ctx)
				if err1 != nil || err2 != nil {
					t.Error(err1, err2)
					return
				}
				mu.Lock()
				moved, removed = moved+m, removed+r
				mu.Unlock()
				if m == 0 && r == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if moved != n || removed != n {
		t.Fatalf("workers moved %d and removed %d; want %d each", moved, removed, n)
	}
	var inSource, inDLQ, distinct int
	err := pool.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE q.name = 'work'),
		count(*) FILTER (WHERE q.name = 'work.dlq'),
		count(DISTINCT m.message_id) FILTER (WHERE q.name = 'work.dlq')
		FROM skipq.messages m JOIN skipq.queues q ON q.id = m.queue_id`).Scan(&inSource, &inDLQ, &distinct)
	if err != nil {
		t.Fatal(err)
	}
	if inSource != 0 || inDLQ != n || distinct != n {
		t.Fatalf("source holds %d, dead-letter queue %d (%d distinct); want 0 and %d", inSource, inDLQ, distinct, n)
	}
}
