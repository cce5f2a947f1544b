package service

import "sync"

// queueKinds remembers which queues are FIFO, by tenant and name, so that a
// receive runs the claim of its queue's type without looking the queue up
// first. A queue not seen yet is taken for standard; a claim that finds
// nothing looks the queue up (Receive's waitTarget), which corrects the
// guess. A wrong guess is harmless: each claim takes only queues of its own
// type.
type queueKinds struct {
	mu   sync.Mutex
	fifo map[queueName]bool
}

func (k *queueKinds) isFIFO(tenant, name string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.fifo[queueName{tenant, name}]
}

// set records a queue's type and says whether it differs from the guess.
func (k *queueKinds) set(tenant, name string, fifo bool) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := queueName{tenant, name}
	if k.fifo[key] == fifo {
		return false
	}
	if k.fifo == nil || len(k.fifo) >= queueNamesMax {
		k.fifo = map[queueName]bool{}
	}
	if fifo {
		k.fifo[key] = true
	} else {
		delete(k.fifo, key)
	}
	return true
}
