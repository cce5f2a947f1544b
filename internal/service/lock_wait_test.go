package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/service"
)

// A request whose statement must wait on a lock that an outside
// transaction holds waits alone: requests of the same kind for other queues
// and tenants, which this node would share a statement with, answer while
// it waits, and it answers correctly once the outside transaction ends.
// Each case holds its lock with the SQL API in an open transaction, as a
// user's transaction would.
func TestOnlyTheRequestThatMustWaitWaits(t *testing.T) {
	svc, _, pool := newService(t)
	ctx := context.Background()
	zero, one := 0, 1
	receive := func(t *testing.T, tenant, queue string) service.Message {
		t.Helper()
		msgs, err := svc.Receive(ctx, tenant, queue, service.ReceiveOptions{MaxMessages: &one, WaitSeconds: &zero})
		if err != nil || len(msgs) != 1 {
			t.Fatalf("received %d from %s/%s: %v", len(msgs), tenant, queue, err)
		}
		return msgs[0]
	}
	send := func(tenant, queue string, in service.MessageInput) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := svc.Send(ctx, tenant, queue, in)
			return err
		}
	}
	// received sends a message to tenant/queue and leases it.
	received := func(t *testing.T, tenant, queue string) service.Message {
		t.Helper()
		if _, err := svc.Send(ctx, tenant, queue, service.MessageInput{Body: "x"}); err != nil {
			t.Fatal(err)
		}
		return receive(t, tenant, queue)
	}
	fifo := true
	if _, _, err := svc.PutQueue(ctx, "default", "f", service.QueueSettings{FIFO: &fifo}); err != nil {
		t.Fatal(err)
	}

	t.Run("send to a FIFO group an SQL transaction holds", func(t *testing.T) {
		var sqlSeq int64
		var waited service.SendResult
		lockWaitCase{
			hold: func(tx pgx.Tx) error {
				return tx.QueryRow(ctx, "SELECT sequence FROM skipq.send('f', 'from sql', group_id => 'g1')").Scan(&sqlSeq)
			},
			waiter: func(ctx context.Context) (err error) {
				waited, err = svc.Send(ctx, "default", "f", service.MessageInput{Body: "from http", GroupID: "g1"})
				return err
			},
			others: []func(context.Context) error{
				send("default", "other", service.MessageInput{Body: "x"}),
				send("tenant-b", "other", service.MessageInput{Body: "x"}),
				send("default", "f", service.MessageInput{Body: "x", GroupID: "g2"}),
			},
			commit: true,
		}.run(t, pool)
		if waited.Sequence <= sqlSeq {
			t.Fatalf("the waiting send got sequence %d, before the SQL send's %d", waited.Sequence, sqlSeq)
		}
	})

	t.Run("resend of an idempotency key an SQL transaction holds", func(t *testing.T) {
		var waited service.SendResult
		lockWaitCase{
			hold: func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "SELECT skipq.send('keys', 'same', message_id => 'k1')")
				return err
			},
			waiter: func(ctx context.Context) (err error) {
				waited, err = svc.Send(ctx, "default", "keys", service.MessageInput{Body: "same", MessageID: "k1"})
				return err
			},
			others: []func(context.Context) error{
				send("default", "other", service.MessageInput{Body: "x"}),
				send("tenant-b", "other", service.MessageInput{Body: "x", MessageID: "k1"}),
			},
			commit: true,
		}.run(t, pool)
		if !waited.Duplicate {
			t.Fatal("the resend after the SQL send committed is not a duplicate")
		}
	})

	// settles builds the case of a settle of a message whose row an SQL
	// transaction holds with skipq.set_visibility.
	settles := func(t *testing.T, settle func(ctx context.Context, handles []string) (service.SettleResult, error), commit bool) {
		held := received(t, "default", "held")
		var waited service.SettleResult
		c := lockWaitCase{
			hold: func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "SELECT skipq.set_visibility($1, 60)", held.ReceiptHandle)
				return err
			},
			waiter: func(ctx context.Context) (err error) {
				waited, err = settle(ctx, []string{held.ReceiptHandle})
				return err
			},
			commit: commit,
		}
		for _, tenant := range []string{"default", "tenant-b"} {
			m := received(t, tenant, "free")
			c.others = append(c.others, func(ctx context.Context) error {
				res, err := settle(ctx, []string{m.ReceiptHandle})
				if err == nil && res.Succeeded != 1 {
					t.Errorf("a settle of a free message: %+v", res)
				}
				return err
			})
		}
		c.run(t, pool)
		if waited.Succeeded != 1 {
			t.Fatalf("the waiting settle answered %+v, want it settled (the handle stays valid)", waited)
		}
	}
	t.Run("ack of a row set_visibility holds", func(t *testing.T) {
		settles(t, svc.Ack, true)
	})
	t.Run("nack of a row set_visibility holds", func(t *testing.T) {
		settles(t, func(ctx context.Context, hs []string) (service.SettleResult, error) { return svc.Nack(ctx, hs, nil) }, false)
	})
	t.Run("extend of a row set_visibility holds", func(t *testing.T) {
		settles(t, func(ctx context.Context, hs []string) (service.SettleResult, error) {
			res, err := svc.SetVisibility(ctx, hs, 30)
			return res.SettleResult, err
		}, true)
	})
}

// lockWaitCase is one request that must wait on an outside transaction's
// lock, and requests that must not wait behind it.
type lockWaitCase struct {
	hold   func(tx pgx.Tx) error // takes the lock in the outside transaction
	waiter func(ctx context.Context) error
	others []func(ctx context.Context) error
	commit bool // how the outside transaction ends
}

func (c lockWaitCase) run(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := c.hold(tx); err != nil {
		t.Fatal(err)
	}
	waiterDone := make(chan error, 1)
	go func() { waiterDone <- c.waiter(ctx) }()
	awaitLockWait(t, pool)

	// Each other request answers while the waiter still waits. The
	// deadline only turns a hang (the defect) into a failure.
	for i, other := range c.others {
		otherCtx, cancel := context.WithTimeout(ctx, time.Minute)
		err := other(otherCtx)
		cancel()
		if err != nil {
			t.Fatalf("request %d, which waits on nothing, failed while another waited on a lock: %v", i, err)
		}
		select {
		case err := <-waiterDone:
			t.Fatalf("the request that must wait answered while the lock was held: %v", err)
		default:
		}
	}
	if c.commit {
		err = tx.Commit(ctx)
	} else {
		err = tx.Rollback(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := <-waiterDone; err != nil {
		t.Fatalf("the request that waited: %v", err)
	}
}

// awaitLockWait returns once some session waits for a lock.
func awaitLockWait(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	for {
		var waiting bool
		if err := pool.QueryRow(context.Background(), "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted)").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// Shared claims take rows and groups with SKIP LOCKED and try-locks: while
// an SQL transaction holds a FIFO group (an open send to it) and the row of
// another group's first message, a single-message receive of that queue,
// which shares the claim statement, answers without waiting (at most a
// message no one holds).
func TestSharedClaimsPassLocksHeldOutside(t *testing.T) {
	svc, _, pool := newService(t)
	ctx := context.Background()
	fifo := true
	if _, _, err := svc.PutQueue(ctx, "default", "fc", service.QueueSettings{FIFO: &fifo}); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"g1", "g3"} {
		if _, err := svc.Send(ctx, "default", "fc", service.MessageInput{Body: g, GroupID: g}); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT skipq.send('fc', 'held', group_id => 'g2')"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM skipq.messages WHERE group_id = 'g1' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	// The deadline only turns a hang into a failure.
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	one, zero := 1, 0
	msgs, err := svc.Receive(rctx, "default", "fc", service.ReceiveOptions{MaxMessages: &one, WaitSeconds: &zero})
	if err != nil {
		t.Fatalf("receive past the held group and row: %v", err)
	}
	for _, m := range msgs {
		if m.GroupID == nil || *m.GroupID != "g3" {
			t.Fatalf("received %+v, a message of a group the transaction holds", m)
		}
	}
}
