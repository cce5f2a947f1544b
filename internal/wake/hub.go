// Package wake owns the wake-ups of waiting receives end to end: the
// channel and its payload (written by the SQL function skipq.wake, read by
// ParseNotice), the node's LISTEN connection (Listener), and the hub that
// parks waiting receives and publishes this node's changes to the others.
package wake

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
)

// RecheckInterval is how often the head waiter of each queue re-claims on
// its own while the node's listener is down (or not yet up), and how often
// receivers waiting on a queue that does not exist yet look it up again:
// one query per queue per node per interval however many receivers wait.
const RecheckInterval = 900 * time.Millisecond

// SafetyRecheckInterval is how often the head waiter of each queue
// re-claims while the listener is up. Everything that makes a message
// available is announced then -- sends (HTTP and SQL), nacks, requeues,
// moves, and the worker's timers for delays and leases that ended -- so
// this only bounds the wait after a lost notification, and keeps an idle
// node's statements few.
const SafetyRecheckInterval = 5 * time.Second

// notifyGap is the least time between two NOTIFY rounds. Under load a round
// per send would add a fourth commit to every message's lifecycle; with the
// gap, rounds carry many queues' counts at once, at the cost of up to this
// much extra wake-up latency for receivers on other nodes (a node's own
// receivers are woken at once, without NOTIFY).
const notifyGap = 5 * time.Millisecond

// MissingQueue is the hub key of receivers waiting on a queue that does not
// exist yet; they are all woken on every recheck to look it up again.
const MissingQueue int64 = 0

// Hub is a node's long-poll switchboard. Waiting receives hold no database
// connection: they park here, keyed by queue id, and are woken in FIFO order
// by local sends (at once), by other nodes' NOTIFYs (through the node's one
// listener connection) and by the periodic recheck.
//
// Local changes are also published to other nodes. Notifications are
// coalesced: the publisher sends one NOTIFY transaction per round for all
// queues touched since the last round, outside the data transactions, so
// senders never serialize on Postgres's NOTIFY commit lock.
type Hub struct {
	nodeID string
	pool   *pgxpool.Pool
	log    *slog.Logger

	mu      sync.Mutex
	waiters map[int64][]*Waiter
	pending map[int64]int
	closed  bool

	kick    chan struct{}
	closing chan struct{}

	// listening is whether the node's listener is connected (its
	// notifications arrive); lastRecheck is the last recheck of every
	// queue (Run's goroutine only).
	listening   atomic.Bool
	lastRecheck time.Time

	// maxParked caps the receives waiting on this node (SKIPQ_MAX_WAITERS;
	// 0: no cap). parked counts them from park to unpark, across their
	// wake-ups and re-claims; refused counts the ones turned away.
	maxParked int64
	parked    atomic.Int64
	refused   atomic.Uint64
}

// Waiter is one parked receive.
type Waiter struct {
	c chan struct{} // buffered(1): a wake-up is never lost, never blocks
}

// C receives the waiter's wake-up.
func (w *Waiter) C() <-chan struct{} { return w.c }

// NewHub makes a node's hub; nodeID tells its own notifications apart.
func NewHub(nodeID string, pool *pgxpool.Pool, log *slog.Logger, maxParked int) *Hub {
	return &Hub{
		nodeID:    nodeID,
		pool:      pool,
		log:       log,
		waiters:   map[int64][]*Waiter{},
		pending:   map[int64]int{},
		kick:      make(chan struct{}, 1),
		closing:   make(chan struct{}),
		maxParked: int64(maxParked),
	}
}

// Park counts a receive in as waiting, unless the node already holds its
// most; it reports whether the receive may wait. Every true is paired with
// one Unpark.
func (h *Hub) Park() bool {
	for {
		n := h.parked.Load()
		if h.maxParked > 0 && n >= h.maxParked {
			h.refused.Add(1)
			return false
		}
		if h.parked.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Unpark counts a receive out (see Park).
func (h *Hub) Unpark() { h.parked.Add(-1) }

// LongPollStats is what the hub reports for metrics.
type LongPollStats struct {
	Parked    int    // receives waiting on this node now
	MaxParked int    // the cap (SKIPQ_MAX_WAITERS); 0: none
	Refused   uint64 // receives refused at the cap since start
}

// Stats reads the long-poll counters.
func (h *Hub) Stats() LongPollStats {
	return LongPollStats{Parked: int(h.parked.Load()), MaxParked: int(h.maxParked), Refused: h.refused.Load()}
}

// Register parks a new waiter on a queue. Register BEFORE the claim that may
// come back empty, so a wake-up between that claim and the wait is kept.
func (h *Hub) Register(queueID int64) *Waiter {
	w := &Waiter{c: make(chan struct{}, 1)}
	h.mu.Lock()
	h.waiters[queueID] = append(h.waiters[queueID], w)
	h.mu.Unlock()
	return w
}

// Unregister takes a waiter off its queue's list.
func (h *Hub) Unregister(queueID int64, w *Waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	list := h.waiters[queueID]
	for i, x := range list {
		if x == w {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(h.waiters, queueID)
	} else {
		h.waiters[queueID] = list
	}
}

// Wake signals up to n of a queue's waiters (all when n <= 0), oldest first,
// and takes them off the list: a woken waiter claims, then registers again
// if it must keep waiting.
func (h *Hub) Wake(queueID int64, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wakeLocked(queueID, n)
}

func (h *Hub) wakeLocked(queueID int64, n int) {
	list := h.waiters[queueID]
	if n <= 0 || n > len(list) {
		n = len(list)
	}
	for _, w := range list[:n] {
		select {
		case w.c <- struct{}{}:
		default:
		}
	}
	if n == len(list) {
		delete(h.waiters, queueID)
	} else {
		h.waiters[queueID] = append(list[:0:0], list[n:]...)
	}
}

// ListenerConnected is the listener's OnConnect: notifications arrive
// again, and every waiter is woken, as some may have been missed.
func (h *Hub) ListenerConnected() {
	h.listening.Store(true)
	h.WakeAll()
}

// ListenerLost is the listener's OnDisconnect: until it is back, waiters
// re-claim every RecheckInterval.
func (h *Hub) ListenerLost(error) { h.listening.Store(false) }

// WakeAll wakes every waiter.
func (h *Hub) WakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range h.waiters {
		h.wakeLocked(id, 0)
	}
}

// Publish announces that count messages became available in a queue: local
// waiters wake now, other nodes on the next notify round.
func (h *Hub) Publish(queueID int64, count int) {
	if count <= 0 {
		return
	}
	h.mu.Lock()
	h.publishLocked(queueID, count)
	h.mu.Unlock()
	h.kickNotify()
}

// PublishEach announces one message available in each of queueIDs, as
// Publish does for each, and first tells waking how many local waiters it
// is about to wake (called with the hub locked, before any of them wakes):
// a publish to a topic wakes a waiter on each of its groups at once, and
// the node's claims can be told to expect them together.
func (h *Hub) PublishEach(queueIDs []int64, waking func(n int)) {
	if len(queueIDs) == 0 {
		return
	}
	h.mu.Lock()
	n := 0
	for _, id := range queueIDs {
		if len(h.waiters[id]) > 0 {
			n++
		}
	}
	waking(n)
	for _, id := range queueIDs {
		h.publishLocked(id, 1)
	}
	h.mu.Unlock()
	h.kickNotify()
}

// publishLocked wakes up to count local waiters of a queue and keeps its
// notification for the next round. Called with mu held.
func (h *Hub) publishLocked(queueID int64, count int) {
	h.wakeLocked(queueID, count)
	h.pending[queueID] += count
}

// kickNotify starts a notify round (Run) unless one is already due.
func (h *Hub) kickNotify() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// HandleNotification takes a payload from the listener and wakes that many
// local waiters, ignoring the node's own notifications (its waiters were
// woken when it published).
func (h *Hub) HandleNotification(payload string) {
	w, ok := ParseNotice(payload)
	if !ok {
		h.log.Warn("ignoring malformed wake notification", "payload", payload)
		return
	}
	if w.Source == h.nodeID {
		return
	}
	h.Wake(w.QueueID, w.Count)
}

// Notice is one wake-up notification: Count messages became available in
// a queue, announced by Source (a node's id, or "sql" for the SQL API).
// skipq.wake (internal/migrations/current/functions/wake.sql) writes it as
// "source queue count"; ParseNotice is its one reader.
type Notice struct {
	Source  string
	QueueID int64
	Count   int
}

// ParseNotice reads a payload of Channel.
func ParseNotice(payload string) (Notice, bool) {
	source, rest, ok := strings.Cut(payload, " ")
	if !ok {
		return Notice{}, false
	}
	qs, cs, ok := strings.Cut(rest, " ")
	queueID, err1 := strconv.ParseInt(qs, 10, 64)
	count, err2 := strconv.Atoi(cs)
	if !ok || err1 != nil || err2 != nil {
		return Notice{}, false
	}
	return Notice{source, queueID, count}, true
}

// Leave ends a wait that will not claim. A wake-up that reached it as it
// left is passed on to the next waiter: with the listener up, the hub's own
// recheck comes only every SafetyRecheckInterval.
func (h *Hub) Leave(queueID int64, w *Waiter) {
	h.Unregister(queueID, w)
	select {
	case <-w.c:
		h.Wake(queueID, 1)
	default:
	}
}

// Closing is closed when the node shuts down; waiting receives return early.
func (h *Hub) Closing() <-chan struct{} { return h.closing }

// Close ends every wait (receives return what they have: nothing).
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.closing)
	}
}

// Run publishes coalesced notifications and drives the periodic recheck
// until ctx is done.
func (h *Hub) Run(ctx context.Context) {
	ticker := time.NewTicker(RecheckInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.kick:
			h.notify(ctx)
			select { // let the next round gather more
			case <-ctx.Done():
				return
			case <-time.After(notifyGap):
			}
		case <-ticker.C:
			every := !h.listening.Load() || time.Since(h.lastRecheck) >= SafetyRecheckInterval
			if every {
				h.lastRecheck = time.Now()
			}
			h.recheck(every)
		}
	}
}

// recheck wakes all waiters of missing queues and, when every is set, the
// oldest waiter of each queue: one claim per queue.
func (h *Hub) recheck(every bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range h.waiters {
		switch {
		case id == MissingQueue:
			h.wakeLocked(id, 0)
		case every:
			h.wakeLocked(id, 1)
		}
	}
}

// notify sends every pending notification in one short transaction.
func (h *Hub) notify(ctx context.Context) {
	h.mu.Lock()
	if len(h.pending) == 0 {
		h.mu.Unlock()
		return
	}
	p := db.WakeNotifyParams{Source: h.nodeID}
	for id, n := range h.pending {
		p.QueueIds = append(p.QueueIds, id)
		p.Counts = append(p.Counts, int32(n))
	}
	clear(h.pending)
	h.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	// Other nodes fall back to their recheck if this fails, so a failure is
	// logged, not retried.
	if err := db.Open(h.pool).WakeNotify(ctx, p); err != nil {
		h.log.Warn("publishing wake notifications failed", "error", err)
	}
}
