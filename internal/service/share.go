package service

import (
	"context"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// sharer lets concurrent requests share one statement, and so one commit
// (docs/PERFORMANCE.md: at batch 1 every design is commit-bound, and only a node that
// sees many concurrent requests can write them in one commit). A call that
// finds no statement of its kind in flight runs at once, alone: there is no
// linger timer, so a lone request is never slower. Calls that arrive while
// one runs wait, and the next statement takes all of them together (up to
// maxItems items; the rest wait for the one after). Each call gets its own
// answer only after the statement that carried it committed.
//
// run executes one shared statement for a batch and answers every call in
// it. It must isolate failures: an input one call got wrong never fails the
// others (the statements are written so that bad items simply change
// nothing), and when the shared statement fails as a whole, run retries the
// calls one by one, so each gets its own answer.
//
// A shared statement never waits on a lock held outside it: run's
// statements carry a short lock timeout (db.LockBounded), and run returns
// the calls of a statement that ran out of it, unanswered (the statement
// stored nothing). Each of them then leaves the sharer and runs on its own,
// on its request's goroutine and context (runAlone), so that only the calls
// that really wait for the other transaction -- a FIFO send to a held
// group, a resend of a held key, an ack of a row another transaction holds
// -- wait (alone, without the lock timeout), while every later request of
// the node keeps sharing statements.
type sharer[C any] struct {
	maxItems int
	size     func(*C) int
	run      func(ctx context.Context, batch []*C) (blocked []*C)
	alone    func(ctx context.Context, call *C)
	// queue names what an outside lock a call meets belongs to. While a
	// call of a queue waits on such a lock, and for heldQueueLinger after,
	// the queue's later calls skip the shared statements (runAlone): a
	// client that keeps sending to a held group (giving up and trying
	// again) would otherwise make one shared statement after another wait
	// out its lock timeout.
	queue func(*C) string
	// lockWaiters bounds the connections that calls waiting on a lock held
	// outside (alone) may hold at once, for all the sharers of a node: each
	// may wait for as long as its request lasts, and they must not take the
	// whole pool from everything else. The rest wait here, without a
	// connection.
	lockWaiters *semaphore.Weighted

	mu      sync.Mutex
	busy    bool
	waiting []*shared[C]
	// held are the queues whose calls met a lock held outside lately.
	held map[string]*heldQueue
	// linger bounds how long the first of the calls announced together
	// (expect) waits for the rest; expected counts those still on their
	// way, until expectedBy; gathered is closed when the last of them
	// arrives while the first waits for them.
	linger     time.Duration
	expected   int
	expectedBy time.Time
	gathered   chan struct{}
}

// shared is one waiting call.
type shared[C any] struct {
	call    *C
	done    chan struct{}
	blocked bool // its statement ran out of lock timeout: it runs alone
}

// sharedTimeout bounds a statement run on behalf of several requests: it
// cannot use any one request's context, which its client may cancel.
const sharedTimeout = 10 * time.Second

// do runs call, alone or together with concurrent ones, and returns when its
// answer is in call (or when ctx ends first: the statement may still run).
func (s *sharer[C]) do(ctx context.Context, call *C) error {
	s.mu.Lock()
	now := time.Now()
	if s.isHeld(s.queue(call), now) {
		s.mu.Unlock()
		return s.runAlone(ctx, call)
	}
	first := s.arrived(now)
	if s.busy {
		w := &shared[C]{call: call, done: make(chan struct{})}
		s.waiting = append(s.waiting, w)
		s.mu.Unlock()
		return s.await(ctx, w)
	}
	if first {
		// The first of calls announced together: it waits for the others
		// (up to expectedBy) so that one statement carries them all.
		s.busy = true
		w := &shared[C]{call: call, done: make(chan struct{})}
		s.waiting = append(s.waiting, w)
		gathered := make(chan struct{})
		s.gathered = gathered
		t := time.NewTimer(s.expectedBy.Sub(now))
		s.mu.Unlock()
		select {
		case <-gathered:
		case <-t.C:
		}
		t.Stop()
		s.mu.Lock()
		s.expected, s.gathered = 0, nil
		s.mu.Unlock()
		go s.drain(s.take())
		return s.await(ctx, w)
	}
	s.busy = true
	s.mu.Unlock()

	// Nothing in flight: this request's own statement, on its own context.
	blocked := s.run(ctx, []*C{call})

	// Whoever arrived meanwhile goes next, on a goroutine of its own, so
	// this request answers now instead of serving others.
	if next := s.take(); next != nil {
		go s.drain(next)
	}
	if len(blocked) > 0 {
		return s.runAlone(ctx, call)
	}
	return nil
}

// await waits for a waiting call's statement, and runs the call alone if
// that statement met a lock held outside it.
func (s *sharer[C]) await(ctx context.Context, w *shared[C]) error {
	select {
	case <-w.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if w.blocked {
		return s.runAlone(ctx, w.call)
	}
	return nil
}

// expect announces n calls that are about to arrive at once: the waiting
// receives one wake-up released (a publish to a topic wakes a receiver on
// each of its groups). Without it the first to arrive would find no
// statement in flight and run alone, and the rest would share the next
// statement: two rounds where one does (docs/DESIGN.md, "One make for a
// shared claim (00063)"). With it, the first that finds no statement in
// flight waits for the others, for at most s.linger: a bounded linger,
// and only after an announcement; any call that arrives counts as one of
// them.
func (s *sharer[C]) expect(n int) {
	if n < 2 {
		return
	}
	s.mu.Lock()
	s.expected += n
	s.expectedBy = time.Now().Add(s.linger)
	s.mu.Unlock()
}

// arrived counts a call against the expected ones and reports whether it
// is the first of several still expected; the last closes gathered.
// Called with mu held.
func (s *sharer[C]) arrived(now time.Time) (first bool) {
	if s.expected == 0 {
		return false
	}
	if now.After(s.expectedBy) {
		s.expected = 0
		return false
	}
	first = s.gathered == nil && s.expected > 1
	s.expected--
	if s.expected == 0 && s.gathered != nil {
		close(s.gathered)
		s.gathered = nil
	}
	return first
}

// runAlone runs a call whose shared statement met a lock held outside it,
// on its own. Which of the statement's calls needed the lock is not known,
// and most did not: first each runs by itself still under the lock
// timeout, which answers those at once without taking a place of the lock
// waiters. Only a call that meets the lock again waits for it, once a
// connection for lock waiters is free.
func (s *sharer[C]) runAlone(ctx context.Context, call *C) error {
	if len(s.run(ctx, []*C{call})) == 0 {
		return nil
	}
	q := s.queue(call)
	s.mu.Lock()
	if s.held == nil {
		s.held = map[string]*heldQueue{}
	}
	h := s.held[q]
	if h == nil {
		h = &heldQueue{}
		s.held[q] = h
	}
	h.waiting++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		h.waiting--
		h.until = time.Now().Add(heldQueueLinger)
		s.mu.Unlock()
	}()
	if err := s.lockWaiters.Acquire(ctx, 1); err != nil {
		return err
	}
	defer s.lockWaiters.Release(1)
	s.alone(ctx, call)
	return nil
}

// heldQueue is a queue whose calls met a lock held outside: how many wait
// on it now, and when the last stopped waiting.
type heldQueue struct {
	waiting int
	until   time.Time
}

// heldQueueLinger is how long a queue's calls keep skipping the shared
// statements after its last lock wait ended: a client that gave up on a
// held lock tends to try again at once.
const heldQueueLinger = time.Second

// isHeld reports whether queue's calls run alone now, and forgets the
// queues whose time is up. Called with mu held.
func (s *sharer[C]) isHeld(queue string, now time.Time) bool {
	for q, h := range s.held {
		if h.waiting == 0 && now.After(h.until) {
			delete(s.held, q)
		}
	}
	return s.held[queue] != nil
}

// take hands out the next batch, or marks the sharer idle.
func (s *sharer[C]) take() []*shared[C] {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.waiting) == 0 {
		s.busy = false
		return nil
	}
	n, items := 0, 0
	for n < len(s.waiting) && (n == 0 || items+s.size(s.waiting[n].call) <= s.maxItems) {
		items += s.size(s.waiting[n].call)
		n++
	}
	batch := s.waiting[:n:n]
	s.waiting = s.waiting[n:]
	return batch
}

// drain runs the waiting batches until none is left.
func (s *sharer[C]) drain(batch []*shared[C]) {
	for batch != nil {
		calls := make([]*C, len(batch))
		for i, w := range batch {
			calls[i] = w.call
		}
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		blocked := s.run(ctx, calls)
		cancel()
		for _, w := range batch {
			w.blocked = slices.Contains(blocked, w.call)
			close(w.done)
		}
		batch = s.take()
	}
}
