package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/semaphore"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/wake"
)

// Service is one node's view of skipq: stateless apart from the long-poll
// waiters it is holding.
type Service struct {
	pool *pgxpool.Pool
	q    *db.Queries // each statement run as package db decides (db.Open)
	// shared and own are where the statements that concurrent requests
	// share run: in the sharer, under a lock timeout, and, for a call whose
	// shared statement met a lock held outside it, on its own. They commit
	// durably; commits holds the ways a claim, a settle and an autoAck
	// receive commit (docs/RELIABILITY.md, "Durability by need").
	shared, own statements
	commits     commitModes
	// batchClaims and autoAcks run the claims that receives of more than
	// one message, and autoAck receives, make on their own.
	batchClaims, autoAcks *db.Queries
	limits                Limits
	log                   *slog.Logger
	hub                   *wake.Hub
	acks                  *sharer[settleCall]
	nacks                 *sharer[settleCall]
	extends               *sharer[settleCall]
	sends                 *sharer[sendCall]
	publishes             *sharer[publishCall]
	claims                *sharer[claimCall]
	names                 queueNames
	order                 claimOrder
	obs                   Observer
	// now, when set, replaces the database clock in every time-based rule
	// (tests move time instead of sleeping).
	now func() *time.Time
}

// Options configure a Service.
type Options struct {
	Limits Limits
	Log    *slog.Logger
	// Clock overrides the database's now() (tests only).
	Clock func() time.Time
	// Observer is told what happened to messages (nil: nobody).
	Observer Observer
	// AsyncAcks lets acks (and autoAck receives) commit without waiting for
	// the WAL flush (SKIPQ_ACK_DURABILITY=async): a crash of the database
	// may then deliver again a message whose ack was answered in its last
	// moments.
	AsyncAcks bool
}

// commitModes are how each kind of change commits. Sends, moves (requeue,
// redrive, dead-lettering) and the worker's statements always wait for
// the flush; what may not is what a crash can only undo into an earlier
// redelivery, which at-least-once delivery allows.
type commitModes struct {
	claim  db.Commit // claims, and a release's way back to available
	extend db.Commit
	nack   db.Commit // durable after all when it moved or discarded a message
	ack    db.Commit // acks and autoAck receives: durable unless Options.AsyncAcks
}

func newCommitModes(asyncAcks bool) commitModes {
	m := commitModes{claim: db.CommitAsync, extend: db.CommitAsync, nack: db.CommitAsyncUnlessMoved, ack: db.CommitDurable}
	if asyncAcks {
		m.ack = db.CommitAsync
	}
	return m
}

// New builds a Service on a pool. Its long-poll hub (Hub) is started by the
// node, which feeds it the LISTEN connection's notices (package wake).
func New(pool *pgxpool.Pool, opts Options) *Service {
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	q := db.Open(pool)
	s := &Service{
		pool:    pool,
		q:       q,
		shared:  statements{q: db.New(db.LockBounded(pool)), tx: db.LockBoundedTxOptions, lockBounded: true},
		own:     statements{q: q, tx: db.TxOptions},
		commits: newCommitModes(opts.AsyncAcks),
		limits:  opts.Limits,
		log:     log,
		now:     func() *time.Time { return nil },
		obs:     opts.Observer,
	}
	if s.obs == nil {
		s.obs = nopObserver{}
	}
	if opts.Clock != nil {
		s.now = func() *time.Time { t := opts.Clock(); return &t }
	}
	lockWaiters := semaphore.NewWeighted(lockWaitConns(pool))
	s.acks = s.settleSharer(s.runAcks, s.commits.ack, lockWaiters)
	s.nacks = s.settleSharer(s.runNacks, s.commits.nack, lockWaiters)
	s.extends = s.settleSharer(s.runExtends, s.commits.extend, lockWaiters)
	sharedClaims, ownClaims := s.committing(s.commits.claim)
	// A claim behind an ack commits as the ack does.
	sharedClaims.ackClaimSetup = db.AckThenClaimSetup(true, s.commits.ack)
	ownClaims.ackClaimSetup = db.AckThenClaimSetup(false, s.commits.ack)
	s.batchClaims = db.New(db.Committing(pool, s.commits.claim))
	s.autoAcks = db.New(db.Committing(pool, s.commits.ack))
	s.sends = &sharer[sendCall]{maxItems: sharedSendBytes, size: sendSize, lockWaiters: lockWaiters,
		queue: func(c *sendCall) string { return c.tenant + "/" + c.queue },
		run:   func(ctx context.Context, calls []*sendCall) []*sendCall { return s.runSends(ctx, s.shared, calls) },
		alone: func(ctx context.Context, c *sendCall) { s.sendAlone(ctx, s.own, c) }}
	s.publishes = &sharer[publishCall]{maxItems: sharedSendBytes, size: publishSize, lockWaiters: lockWaiters,
		queue: func(c *publishCall) string { return c.tenant + "/topic " + c.topic },
		run: func(ctx context.Context, calls []*publishCall) []*publishCall {
			return s.runPublishes(ctx, s.shared, calls)
		},
		alone: func(ctx context.Context, c *publishCall) { s.publishAlone(ctx, s.own, c) }}
	s.claims = &sharer[claimCall]{maxItems: sharedClaimCalls, size: claimSize, lockWaiters: lockWaiters,
		linger: claimsLinger,
		queue:  func(c *claimCall) string { return c.tenant + "/" + c.queue },
		run: func(ctx context.Context, calls []*claimCall) []*claimCall {
			return s.runClaims(ctx, sharedClaims, calls)
		},
		alone: func(ctx context.Context, c *claimCall) { s.runClaims(ctx, ownClaims, []*claimCall{c}) }}
	s.hub = wake.NewHub(newNodeID(), pool, log, opts.Limits.MaxWaiters)
	return s
}

// Limits returns the limits the service enforces.
func (s *Service) Limits() Limits { return s.limits }

// Now is the time every time-based rule uses: nil for the database's
// now(), else Options.Clock's (tests). The worker's statements take it, so
// that they agree with the service's.
func (s *Service) Now() *time.Time { return s.now() }

// Hub returns the node's long-poll hub (listener wiring, shutdown, metrics).
func (s *Service) Hub() *wake.Hub { return s.hub }

// sharedClaimCalls bounds the single-message receives that one shared
// claim serves.
const sharedClaimCalls = 256

// claimsLinger bounds how long the first of the claims a wake-up released
// together waits for the others (sharer.expect): woken goroutines reach
// the sharer within tens of microseconds, unless the machine is busy or a
// waiter left.
const claimsLinger = time.Millisecond

// sharedSettleHandles bounds the handles of one shared settle statement
// (ack, nack or extend): four full requests' worth.
const sharedSettleHandles = 4 * MaxReceiptHandles

// statements are one way to run the statements of a sharer.
type statements struct {
	q  *db.Queries
	tx pgx.TxOptions // for a transaction of several of them
	// lockBounded: a lock wait longer than db.SharedLockTimeout fails the
	// statement, which stored nothing (outsideLock).
	lockBounded bool
	// ackClaimSetup is db.AckThenClaim's setup in this set (claims only).
	ackClaimSetup string
}

// outsideLock reports whether err is a lock-bounded statement's lock wait
// running out: it waited on a lock held outside it, and its calls must run
// on their own.
func (st statements) outsideLock(err error) bool {
	return st.lockBounded && db.IsLockNotAvailable(err)
}

// lockWaitConns is how many of the pool's connections the calls that wait
// on locks held outside skipq (run alone, see sharer) may hold at once: a
// quarter, so that the rest of the node keeps its connections however many
// requests wait on some open transaction.
func lockWaitConns(pool *pgxpool.Pool) int64 {
	if pool == nil { // a Service that only describes itself (the route list)
		return 1
	}
	return max(1, int64(pool.Config().MaxConns)/4)
}

// settleSharer shares acks, nacks or extends, run by run with the lock
// timeout, and alone without, committing as c says.
func (s *Service) settleSharer(run func(context.Context, statements, []*settleCall) []*settleCall, c db.Commit, lockWaiters *semaphore.Weighted) *sharer[settleCall] {
	shared, own := s.committing(c)
	return &sharer[settleCall]{maxItems: sharedSettleHandles, size: settleSize, lockWaiters: lockWaiters,
		queue: settleQueue,
		run:   func(ctx context.Context, calls []*settleCall) []*settleCall { return run(ctx, shared, calls) },
		alone: func(ctx context.Context, c *settleCall) { run(ctx, own, []*settleCall{c}) }}
}

// committing is s.shared and s.own for statements that commit as c says
// (each statement alone: neither is used for transactions of several).
func (s *Service) committing(c db.Commit) (shared, own statements) {
	if c == db.CommitDurable {
		return s.shared, s.own
	}
	return statements{q: db.New(db.LockBoundedCommitting(s.pool, c)), tx: db.LockBoundedTxOptions, lockBounded: true},
		statements{q: db.New(db.Committing(s.pool, c)), tx: db.TxOptions}
}

// inTx runs fn in one transaction (again, should it meet a transaction
// pooler's prepared-statement error: db.RetryPooled).
func (s *Service) inTx(ctx context.Context, fn func(q *db.Queries) error) error {
	return db.RetryPooled(func() error {
		return pgx.BeginTxFunc(ctx, s.pool, db.TxOptions, func(tx pgx.Tx) error {
			return fn(s.q.WithTx(tx))
		})
	})
}

func newNodeID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
