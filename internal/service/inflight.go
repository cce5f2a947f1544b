package service

import (
	"io"
	"math"
	"sync"

	"golang.org/x/sync/semaphore"
)

// ErrBodyBudget is returned for a request whose body would take the node's
// request bytes in flight past its budget (SKIPQ_MAX_INFLIGHT_BYTES).
// Nothing was done, so it may simply be retried.
var ErrBodyBudget = &Error{Kind: KindUnavailable,
	Message: "this node holds as many request bytes as it may (SKIPQ_MAX_INFLIGHT_BYTES); retry later"}

// bodyChunk is how much of a body of unknown length (chunked) is reserved
// at a time while it is read.
const bodyChunk = 64 << 10

// BodyBudget bounds the request body bytes a node holds at once, over every
// route: a flood of large requests is refused with ErrBodyBudget instead of
// taking the node's memory. A nil *BodyBudget bounds nothing.
type BodyBudget struct {
	sem  *semaphore.Weighted
	size int64
}

// NewBodyBudget returns a budget of bytes request bodies in flight.
func NewBodyBudget(bytes int64) *BodyBudget {
	return &BodyBudget{sem: semaphore.NewWeighted(bytes), size: bytes}
}

// Size is the whole budget: no single request larger than it can ever be
// admitted.
func (b *BodyBudget) Size() int64 {
	if b == nil {
		return math.MaxInt64
	}
	return b.size
}

// Hold reserves n bytes of a request already read (a gRPC message, which
// its transport reads whole) and returns their release, or fails with
// ErrBodyBudget, reserving nothing, when they do not fit now.
func (b *BodyBudget) Hold(n int64) (func(), error) {
	if b == nil || n <= 0 {
		return func() {}, nil
	}
	if !b.sem.TryAcquire(n) {
		return nil, ErrBodyBudget
	}
	return func() { b.sem.Release(n) }, nil
}

// Admit reserves a request body of declared length (negative: unknown,
// reserved chunk by chunk as it is read, a read past the budget failing
// with ErrBodyBudget) and returns the body to read in its place and the
// release to call once the request is done. It fails with ErrBodyBudget,
// reserving nothing, when the declared length does not fit now.
func (b *BodyBudget) Admit(body io.ReadCloser, length int64) (io.ReadCloser, func(), error) {
	if b == nil || length == 0 || body == nil {
		return body, func() {}, nil
	}
	if length > 0 {
		release, err := b.Hold(length)
		if err != nil {
			return nil, nil, err
		}
		return body, release, nil
	}
	r := &budgetedBody{ReadCloser: body, sem: b.sem}
	return r, r.release, nil
}

// budgetedBody reserves a body of unknown length as it is read.
type budgetedBody struct {
	io.ReadCloser
	sem *semaphore.Weighted

	mu       sync.Mutex
	reserved int64
}

func (r *budgetedBody) Read(p []byte) (int, error) {
	want := int64(min(len(p), bodyChunk))
	if want == 0 {
		return 0, nil
	}
	if !r.sem.TryAcquire(want) {
		return 0, ErrBodyBudget
	}
	n, err := r.ReadCloser.Read(p[:want])
	r.mu.Lock()
	r.reserved += int64(n)
	r.mu.Unlock()
	r.sem.Release(want - int64(n))
	return n, err
}

func (r *budgetedBody) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sem.Release(r.reserved)
	r.reserved = 0
}
