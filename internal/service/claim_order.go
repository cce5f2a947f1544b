package service

import (
	"bytes"
	"sync"

	"github.com/skipq/skipq/internal/db"
)

// Claim modes of skipq.message_claim for a receive that leases: a plain
// claim walks the queue's ready messages and makes a topic group's pending
// copies when the walk comes back short; a pending-first claim makes the
// pending copies without the walk when the queue has no ready message.
const (
	claimReadyFirst   = "claim"
	claimPendingFirst = "claim_pending_first"
)

// claimOrder remembers the queues whose claims this node saw return topic
// copies, and asks their claims for pending copies first: a group's walk
// of ready messages, mostly empty there, was about a third of its claim
// (docs/PERFORMANCE.md, "Pending copies first"). It is a hint
// and nothing else: either mode returns the queue's ready messages first,
// and a node that forgot (restart, bound) only pays the walk again; a
// plain queue claimed pending first would pay a probe of its ready rows.
type claimOrder struct {
	mu     sync.RWMutex
	queues map[queueName]struct{}
}

// claimOrderMax bounds the queues remembered: past it the map starts over.
const claimOrderMax = 100000

// mode is the claim mode for a leasing claim of a queue.
func (o *claimOrder) mode(tenant, queue string) string {
	o.mu.RLock()
	_, group := o.queues[queueName{tenant, queue}]
	o.mu.RUnlock()
	if group {
		return claimPendingFirst
	}
	return claimReadyFirst
}

// saw notes what a leasing claim of a queue returned: topic copies mark it
// a group, messages without one unmark it, nothing leaves it as it was.
func (o *claimOrder) saw(tenant, queue string, rows []db.SkipqMessage) {
	if len(rows) == 0 {
		return
	}
	copies := false
	for i := range rows {
		if isTopicCopy(rows[i].Tags) {
			copies = true
			break
		}
	}
	key := queueName{tenant, queue}
	o.mu.RLock()
	_, group := o.queues[key]
	o.mu.RUnlock()
	if group == copies {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case !copies:
		delete(o.queues, key)
	case o.queues == nil || len(o.queues) >= claimOrderMax:
		o.queues = map[queueName]struct{}{key: {}}
	default:
		o.queues[key] = struct{}{}
	}
}

// isTopicCopy reports whether a message's tags name a topic. A look for
// the reserved key, without decoding: a tag value spelled like it makes a
// false hint, which costs a probe.
func isTopicCopy(tags []byte) bool {
	return bytes.Contains(tags, []byte(`"`+TopicTagKey+`"`))
}
