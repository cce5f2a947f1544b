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
// copies (groups), and asks a group's claim for its pending copies first
// when no ready message is likely: its last claim came back short (the
// walk found too few ready messages), or the claim asks for 32 or more
// (a claim that large cuts the pending rows it takes and leaves no ready
// copies behind but those past its response budget). A group's claim of fewer than 32 makes whole pending
// rows and leaves the copies it did not lease ready, which the group's
// next claims walk: asked pending first, each of them paid a probe of the
// group's ready and pending rows to learn what the walk tells anyway
// (docs/PERFORMANCE.md, "Pending copies first", and its sequels). It is a
// hint and nothing else: either mode returns the queue's ready messages
// first, and a node that forgot (restart, bound) only pays the walk
// again; a plain queue claimed pending first would pay the probe.
type claimOrder struct {
	mu sync.RWMutex
	// queues are the groups, each with whether its last claim came back
	// short.
	queues map[queueName]bool
}

// claimOrderMax bounds the queues remembered: past it the map starts over.
const claimOrderMax = 100000

// pendingFirstMin is the smallest claim that asks a group for pending
// copies first whatever its last claim returned: skipq.topic_copies_make
// cuts rows for claims this large, so they leave no ready copies (but
// those past the response budget).
const pendingFirstMin = 32

// mode is the claim mode for a leasing claim of up to max messages of a
// queue.
func (o *claimOrder) mode(tenant, queue string, max int) string {
	o.mu.RLock()
	short, group := o.queues[queueName{tenant, queue}]
	o.mu.RUnlock()
	if group && (short || max >= pendingFirstMin) {
		return claimPendingFirst
	}
	return claimReadyFirst
}

// saw notes what a leasing claim of a queue returned, and whether it came
// back short (fewer messages than asked, within the response budget):
// topic copies mark the queue a group, messages without one unmark it,
// and a claim that returned nothing marks a group's last claim short
// (other queues stay as they were).
func (o *claimOrder) saw(tenant, queue string, rows []db.SkipqMessage, short bool) {
	key := queueName{tenant, queue}
	o.mu.RLock()
	wasShort, group := o.queues[key]
	o.mu.RUnlock()
	if len(rows) == 0 {
		if group && !wasShort {
			o.note(key, true, true)
		}
		return
	}
	copies := false
	for i := range rows {
		if isTopicCopy(rows[i].Tags) {
			copies = true
			break
		}
	}
	if group == copies && (!group || wasShort == short) {
		return
	}
	o.note(key, copies, short)
}

// note records whether key is a group and, if it is, whether its last
// claim came back short.
func (o *claimOrder) note(key queueName, group, short bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case !group:
		delete(o.queues, key)
	case o.queues == nil || len(o.queues) >= claimOrderMax:
		o.queues = map[queueName]bool{key: short}
	default:
		o.queues[key] = short
	}
}

// isTopicCopy reports whether a message's tags name a topic. A look for
// the reserved key, without decoding: a tag value spelled like it makes a
// false hint, which costs a probe.
func isTopicCopy(tags []byte) bool {
	return bytes.Contains(tags, []byte(`"`+TopicTagKey+`"`))
}
