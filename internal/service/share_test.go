package service

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
)

// A lone call runs at once, alone; calls that arrive while a statement runs
// go together in the next one, at most maxItems items each; every call
// returns only once the statement that carried it ran.
func TestSharerBatchesWhatWaits(t *testing.T) {
	type call struct {
		id, items int
		ranIn     int // the statement (1, 2, ...) that carried it
	}
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	var mu sync.Mutex
	var batches [][]int
	s := &sharer[call]{
		maxItems: 5,
		size:     func(c *call) int { return c.items },
		queue:    func(*call) string { return "" },
		run: func(_ context.Context, batch []*call) []*call {
			mu.Lock()
			n := len(batches) + 1
			var ids []int
			for _, c := range batch {
				ids = append(ids, c.id)
				c.ranIn = n
			}
			batches = append(batches, ids)
			mu.Unlock()
			if n == 1 {
				started <- struct{}{}
				<-release // the first statement is in flight until released
			}
			return nil
		},
	}
	ctx := context.Background()
	first := &call{id: 0, items: 1}
	firstDone := make(chan struct{})
	go func() { _ = s.do(ctx, first); close(firstDone) }()
	<-started

	// Six calls of two items each arrive while the first statement runs.
	var wg sync.WaitGroup
	calls := make([]*call, 6)
	for i := range calls {
		calls[i] = &call{id: i + 1, items: 2}
		wg.Go(func() {
			if err := s.do(ctx, calls[i]); err != nil {
				t.Error(err)
			}
		})
	}
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.waiting) == 6 })
	for _, c := range calls {
		if c.ranIn != 0 {
			t.Fatalf("call %d ran before the statement in flight finished", c.id)
		}
	}
	close(release)
	<-firstDone
	wg.Wait()

	if len(batches) != 4 || !slices.Equal(batches[0], []int{0}) {
		t.Fatalf("statements %v: want the lone call alone, then the six waiting calls in batches of at most 5 items", batches)
	}
	for _, b := range batches[1:] {
		if len(b) != 2 {
			t.Fatalf("statements %v: want two waiting calls (4 items) per statement", batches)
		}
	}
	// The drainer goes idle right after it answered the last batch.
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return !s.busy && len(s.waiting) == 0 })

	// Idle again: the next lone call runs at once, alone.
	last := &call{id: 9, items: 1}
	if err := s.do(ctx, last); err != nil || last.ranIn != 5 {
		t.Fatalf("a lone call after the burst ran in statement %d (%v), want 5", last.ranIn, err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i > 100000 {
			t.Fatal("condition never held")
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// Calls whose statement met a lock held outside it leave the sharer: a
// call that did not need the lock answers by itself without waiting for a
// lock waiter's place, and at most lockWaiters calls wait on the lock at
// once, the rest without running.
func TestSharerRunsBlockedCallsAloneBounded(t *testing.T) {
	type call struct {
		id   int
		held bool // needs the lock another transaction holds
	}
	var mu sync.Mutex
	runs := map[int]int{}
	inAlone, maxInAlone := 0, 0
	release := make(chan struct{})
	s := &sharer[call]{
		maxItems:    100,
		size:        func(*call) int { return 1 },
		queue:       func(c *call) string { return fmt.Sprint(c.held) },
		lockWaiters: semaphore.NewWeighted(1),
		run: func(_ context.Context, batch []*call) []*call {
			mu.Lock()
			defer mu.Unlock()
			for _, c := range batch {
				runs[c.id]++
				if c.held {
					return batch // the statement fails as a whole
				}
			}
			return nil
		},
		alone: func(_ context.Context, c *call) {
			mu.Lock()
			inAlone++
			maxInAlone = max(maxInAlone, inAlone)
			mu.Unlock()
			<-release
			mu.Lock()
			inAlone--
			mu.Unlock()
		},
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for id := range 3 {
		wg.Go(func() { _ = s.do(ctx, &call{id: id, held: true}) })
	}
	// Each held call met the lock (shared, or by itself once another call
	// of its queue waited on it): one waits alone, the others for its
	// place.
	for {
		mu.Lock()
		ready := runs[0] >= 1 && runs[1] >= 1 && runs[2] >= 1 && inAlone == 1
		mu.Unlock()
		if ready {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := s.do(ctx, &call{id: 3}); err != nil {
		t.Fatal(err)
	}
	close(release)
	wg.Wait()
	if maxInAlone != 1 {
		t.Fatalf("%d calls waited on the lock at once, want at most 1", maxInAlone)
	}
}

// Calls announced together (expect) share one statement: the first that
// finds nothing in flight waits for the others instead of running alone,
// until the last arrives or the linger ends (a call announced that never
// comes holds the others no longer than that).
func TestSharerGathersExpectedCalls(t *testing.T) {
	type call struct{ id int }
	for _, tc := range []struct {
		name            string
		announced, come int
		linger          time.Duration
	}{
		{"all come", 3, 3, time.Hour},
		{"one never comes", 3, 2, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var batches [][]int
			s := &sharer[call]{
				maxItems: 10, linger: tc.linger,
				size:  func(*call) int { return 1 },
				queue: func(*call) string { return "" },
				run: func(_ context.Context, batch []*call) []*call {
					mu.Lock()
					defer mu.Unlock()
					var ids []int
					for _, c := range batch {
						ids = append(ids, c.id)
					}
					batches = append(batches, ids)
					return nil
				},
			}
			s.expect(tc.announced)
			var wg sync.WaitGroup
			for i := range tc.come {
				wg.Go(func() {
					if err := s.do(context.Background(), &call{id: i}); err != nil {
						t.Error(err)
					}
				})
				if i == 0 {
					// The first waits for the others, having run nothing.
					waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.waiting) == 1 })
					mu.Lock()
					ran := len(batches)
					mu.Unlock()
					if ran != 0 {
						t.Fatalf("the first call announced ran before the others came: %v", batches)
					}
				}
			}
			wg.Wait()
			if len(batches) != 1 || len(batches[0]) != tc.come {
				t.Fatalf("statements %v: want the %d calls that came in one", batches, tc.come)
			}
			// The announcement is spent: a later call runs at once, alone.
			if err := s.do(context.Background(), &call{id: 9}); err != nil || len(batches) != 2 || len(batches[1]) != 1 {
				t.Fatalf("a later call: %v, statements %v", err, batches)
			}
		})
	}
}

// A call that comes without an announcement, or one announced alone, runs
// at once: expect(1) announces nothing.
func TestSharerExpectOfOneAnnouncesNothing(t *testing.T) {
	ran := make(chan int, 1)
	s := &sharer[int]{maxItems: 10, linger: time.Hour, size: func(*int) int { return 1 },
		queue: func(*int) string { return "" },
		run:   func(_ context.Context, batch []*int) []*int { ran <- len(batch); return nil }}
	s.expect(1)
	v := 1
	if err := s.do(context.Background(), &v); err != nil {
		t.Fatal(err)
	}
	if n := <-ran; n != 1 {
		t.Fatalf("ran %d calls, want the one", n)
	}
}
