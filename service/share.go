package service

import (
	"context"
	"sync"
	"time"
)

// sharer lets concurrent requests share one statement, and so one commit
// (SPEC §8: at batch 1 every design is commit-bound, and only a node that
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
type sharer[C any] struct {
	maxItems int
	size     func(*C) int
	run      func(ctx context.Context, batch []*C)

	mu      sync.Mutex
	busy    bool
	waiting []*shared[C]
}

// shared is one waiting call.
type shared[C any] struct {
	call *C
	done chan struct{}
}

// sharedTimeout bounds a statement run on behalf of several requests: it
// cannot use any one request's context, which its client may cancel.
const sharedTimeout = 10 * time.Second

// do runs call, alone or together with concurrent ones, and returns when its
// answer is in call (or when ctx ends first: the statement may still run).
func (s *sharer[C]) do(ctx context.Context, call *C) error {
	s.mu.Lock()
	if s.busy {
		w := &shared[C]{call: call, done: make(chan struct{})}
		s.waiting = append(s.waiting, w)
		s.mu.Unlock()
		select {
		case <-w.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.busy = true
	s.mu.Unlock()

	// Nothing in flight: this request's own statement, on its own context.
	s.run(ctx, []*C{call})

	// Whoever arrived meanwhile goes next, on a goroutine of its own, so
	// this request answers now instead of serving others.
	if next := s.take(); next != nil {
		go s.drain(next)
	}
	return nil
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
		s.run(ctx, calls)
		cancel()
		for _, w := range batch {
			close(w.done)
		}
		batch = s.take()
	}
}
