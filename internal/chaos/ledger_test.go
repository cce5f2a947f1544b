//go:build chaos || failover

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The audit: a trigger in the chaos test's database only (never in
// migrations) records every row that leaves skipq.messages, and every row
// that a move (dead-lettering, requeue) puts in, each with its transaction
// and the statement that did it: sqlc names each query in its text
// ("-- name: MessageAckByReceipt"), and current_query() is the statement the
// node sent. The verdict settles acks from this evidence instead of from
// the queue's being empty.
const auditSQL = `
CREATE SCHEMA chaos_audit;
CREATE TABLE chaos_audit.events (
    op            text        NOT NULL, -- 'delete' or 'insert'
    queue_id      bigint      NOT NULL,
    message_id    text        NOT NULL,
    receive_count integer     NOT NULL,
    txid          bigint      NOT NULL,
    how           text        NOT NULL, -- the sqlc query name, else the statement
    at            timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION chaos_audit.how() RETURNS text LANGUAGE sql AS
    $$ SELECT coalesce(substring(current_query() FROM '-- name: (\w+)'), current_query()) $$;
CREATE FUNCTION chaos_audit.deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chaos_audit.events (op, queue_id, message_id, receive_count, txid, how)
    SELECT 'delete', o.queue_id, o.message_id, o.receive_count, txid_current(), chaos_audit.how()
    FROM old_rows o;
    RETURN NULL;
END $$;
CREATE TRIGGER chaos_audit_deleted AFTER DELETE ON skipq.messages
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION chaos_audit.deleted();
CREATE FUNCTION chaos_audit.inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chaos_audit.events (op, queue_id, message_id, receive_count, txid, how)
    SELECT 'insert', n.queue_id, n.message_id, n.receive_count, txid_current(), chaos_audit.how()
    FROM new_rows n WHERE n.re_routed_from IS NOT NULL;
    RETURN NULL;
END $$;
CREATE TRIGGER chaos_audit_inserted AFTER INSERT ON skipq.messages
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION chaos_audit.inserted();
`

// The statements that may take a message out of skipq.messages in this
// workload, by query name: the ack, the worker's dead-letter move of an
// expired last lease, a nack (whose last deliveries it dead-letters in the
// same statement, through skipq.message_dead_letter) and the requeue.
const (
	howAck        = "MessageAckByReceipt"
	howDeadLetter = "MessageDeadLetter"
	howNack       = "MessageNack"
	howRequeue    = "MessageRequeue"
)

// auditVerdict connects to dbURL and judges the ids in sent (id -> true)
// by the ledger and the audit; the connection is closed with the test.
func auditVerdict(t *testing.T, dbURL string, sent *sync.Map, book *ledger) (verdict, []string, *pgx.Conn) {
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	events, err := loadAudit(context.Background(), conn)
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	var sentIDs []string
	sent.Range(func(k, _ any) bool {
		sentIDs = append(sentIDs, k.(string))
		return true
	})
	return judge(sentIDs, book, events), sentIDs, conn
}

func installAudit(ctx context.Context, dbURL string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, auditSQL)
	return err
}

type auditEvent struct {
	op, queue, id, how string
	count              int
	txid               int64
}

func loadAudit(ctx context.Context, conn *pgx.Conn) ([]auditEvent, error) {
	rows, err := conn.Query(ctx, `SELECT e.op, coalesce(q.name, '?'), e.message_id, e.receive_count, e.txid, e.how
		FROM chaos_audit.events e LEFT JOIN skipq.queues q ON q.id = e.queue_id ORDER BY e.at`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (auditEvent, error) {
		var e auditEvent
		return e, r.Scan(&e.op, &e.queue, &e.id, &e.count, &e.txid, &e.how)
	})
}

// outcome is what a consumer knows of a settle request for a delivery.
type outcome int

const (
	pending outcome = iota // not settled (yet)
	settled                // 200 and not in the failed list
	stale                  // 200 and in the failed list: it settled nothing
	unknown                // no answer, or not a 200: it may have committed
)

func (o outcome) String() string {
	return [...]string{"pending", "settled", "stale", "unknown"}[o]
}

// delivery is one message a receive returned.
type delivery struct {
	queue, id, handle string
	count             int        // receiveCount
	until             time.Time  // visibleUntil, by the database's clock
	delayedTo         *time.Time // of a message sent with a delay
	action            string     // "ack", … once a settle is sent
	outcome           outcome
	audited           bool // the audit holds the settle of this delivery
	// crashes over before its receive was sent, and begun when its answer
	// came (ledger.crashesOver, crashesBegun): a crash in between may have
	// undone its claim.
	crashesBefore, crashesAfter int64
	// when its receive was sent and its answer came, by the test's clock:
	// printed with an unexplained repeat, beside the crashes' times.
	sentAt, answeredAt time.Time
}

type msgKey struct{ queue, id string }

// ledger is the consumers' record of every delivery and settle.
type ledger struct {
	mu        sync.Mutex
	byMessage map[msgKey][]*delivery
	// repeated counts deliveries that repeated their message's
	// receiveCount with no crash of PostgreSQL to explain it; after one,
	// crashRedeliveries: a claim commits without waiting for the disk
	// (docs/RELIABILITY.md, "Durability by need"), so a crash may undo a
	// claim whose answer arrived, and the message comes again with that
	// receiveCount. Redeliveries of an undone claim are not double acks:
	// the undone delivery's handle is stale.
	repeated, crashRedeliveries int
	redeliveries                int
	// Crashes of PostgreSQL (and failovers): begun, and over (every one of
	// its processes dead: devpg's Crash waits for the backends too). A
	// claim can be undone by a crash that was not over when its receive
	// was sent: the dying server may still answer between the fault's
	// start and its processes' end. (Before Crash killed each backend, a
	// busy backend outlived its postmaster and, once in a few failover
	// runs, committed a claim of 50 sent after the crash was "over".)
	crashesBegun, crashesOver atomic.Int64
	// crashTimes are when each crash began and was over (test's clock);
	// repeats describes the first unexplained repeats, for the log.
	crashTimes []string
	repeats    []string
}

func newLedger() *ledger { return &ledger{byMessage: map[msgKey][]*delivery{}} }

type received struct {
	MessageID     string     `json:"messageId"`
	ReceiptHandle string     `json:"receiptHandle"`
	ReceiveCount  int        `json:"receiveCount"`
	VisibleUntil  time.Time  `json:"visibleUntil"`
	DelayedTo     *time.Time `json:"delayedTo"`
}

// crashBegins marks a crash of PostgreSQL (or a failover) as begun: claims
// answered from now on may be undone. crashOver marks it over: the
// crashed server's processes are gone.
func (l *ledger) crashBegins() {
	l.noteCrash("begun")
	l.crashesBegun.Add(1)
}

func (l *ledger) crashOver() {
	l.crashesOver.Add(1)
	l.noteCrash("over")
}

func (l *ledger) noteCrash(what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.crashTimes = append(l.crashTimes, what+" "+time.Now().Format("15:04:05.000000"))
}

// crashCount is the crashes over now: read it before sending a receive and
// give it to received.
func (l *ledger) crashCount() int64 { return l.crashesOver.Load() }

// undone reports whether a crash may have undone p's claim before d was
// claimed: one that was not over when p's receive was sent had begun when
// d's answer came.
func undone(p, d *delivery) bool { return d.crashesAfter > p.crashesBefore }

// received records a receive's messages; crashesBefore is crashCount read
// before the receive was sent. Every delivery of a message in a queue must
// carry a new receiveCount: a second delivery with the same count would be
// two receivers holding one lease, unless a crash undid the first one's
// claim.
func (l *ledger) received(queue string, crashesBefore int64, sentAt time.Time, ms []received) []*delivery {
	answeredAt := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*delivery, len(ms))
	for i, m := range ms {
		d := &delivery{queue: queue, id: m.MessageID, handle: m.ReceiptHandle, count: m.ReceiveCount, until: m.VisibleUntil,
			delayedTo: m.DelayedTo, crashesBefore: crashesBefore, crashesAfter: l.crashesBegun.Load(), sentAt: sentAt, answeredAt: answeredAt}
		k := msgKey{queue, m.MessageID}
		for _, p := range l.byMessage[k] {
			switch {
			case p.count != d.count:
			case undone(p, d):
				l.crashRedeliveries++
			default:
				l.repeated++
				if len(l.repeats) < 5 {
					l.repeats = append(l.repeats, fmt.Sprintf("%s in %s, receiveCount %d: first %s; then %s; crashes %v",
						m.MessageID, queue, d.count, p.describe(), d.describe(), l.crashTimes))
				}
			}
		}
		if m.ReceiveCount > 1 {
			l.redeliveries++
		}
		l.byMessage[k] = append(l.byMessage[k], d)
		out[i] = d
	}
	return out
}

// describe is what the log says of a delivery in an unexplained repeat.
func (d *delivery) describe() string {
	const clock = "15:04:05.000000"
	return fmt.Sprintf("sent %s (crashes over %d), answered %s (crashes begun %d), until %s, %s %v",
		d.sentAt.Format(clock), d.crashesBefore, d.answeredAt.Format(clock), d.crashesAfter,
		d.until.Local().Format(clock), d.action, d.outcome)
}

// find is the delivery of a message with receiveCount count: the last one,
// should a crash have undone the claim of an earlier one with that count.
func (l *ledger) find(queue, id string, count int) *delivery {
	ds := l.byMessage[msgKey{queue, id}]
	for i := len(ds) - 1; i >= 0; i-- {
		if ds[i].count == count {
			return ds[i]
		}
	}
	return nil
}

// settle sends one list-form settle for ds and records each one's outcome.
func (l *ledger) settle(ctx context.Context, c *cluster, path, action string, ds []*delivery, extra map[string]any) {
	if len(ds) == 0 {
		return
	}
	body := map[string]any{}
	for k, v := range extra {
		body[k] = v
	}
	handles := make([]string, len(ds))
	for i, d := range ds {
		handles[i] = d.handle
	}
	body["receiptHandles"] = handles
	l.mu.Lock()
	for _, d := range ds {
		d.action = action
	}
	l.mu.Unlock()
	st, raw := c.post(ctx, path, body)
	var res struct {
		Failed []struct {
			ReceiptHandle string `json:"receiptHandle"`
		} `json:"failed"`
	}
	ok := st == http.StatusOK && json.Unmarshal(raw, &res) == nil
	failed := map[string]bool{}
	for _, f := range res.Failed {
		failed[f.ReceiptHandle] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range ds {
		switch {
		case !ok:
			// The node or the database may have died after the commit.
			d.outcome = unknown
		case failed[d.handle]:
			d.outcome = stale // redelivered meanwhile
		default:
			d.outcome = settled
		}
	}
}

// ackedThenRedelivered counts deliveries that came after a delivery of the
// same message whose ack was answered 200 (and not as stale).
func ackedThenRedelivered(l *ledger) int {
	n := 0
	for _, ds := range l.byMessage {
		acked := -1
		for _, d := range ds {
			if d.action == "ack" && d.outcome == settled && (acked < 0 || d.count < acked) {
				acked = d.count
			}
		}
		for _, d := range ds {
			if acked >= 0 && d.count > acked {
				n++
			}
		}
	}
	return n
}

// verdict is what the records and the audit say.
type verdict struct {
	acked, lost, doubleAcked, acksAnswerLost, auditMismatch int
	earlyRedeliveries, earlyDelayed, overDelivered          int
	deadLettered, requeued, nacked, released, delayed       int
	lostSample                                              []string
	samples                                                 []string
}

// checkLeases flags a delivery made while the previous delivery's lease was
// live: receivers of a queue never get a message while its lease is live
// (docs/API.md#model), unless its holder gave it back (nack, or visibility 0). Both
// times are the database's: a claim sets visibleUntil to its time plus the
// lease it asked for (leaseSeconds), so a delivery's claim time is its
// visibleUntil - leaseSeconds, and it must not be before the visibleUntil of
// the delivery before it. A delivery whose answer was lost leaves a gap in
// the receiveCounts; the check then compares with the last one seen, which
// is weaker but still sound (leases only move forward).
//
// The claim's time is clock_timestamp() read during its statement, after
// its snapshot (skipq.message_claim). It was now(), then clock_timestamp()
// at the call's start, both before the statement's snapshot: a claim that
// began a few milliseconds before the worker readied a delayed message and
// saw the message was dated before the delay ended -- this check caught
// both (early_delayed=1: 5 ms, then 25 ms on a loaded machine).
func (v *verdict) checkLeases(l *ledger) {
	for k, ds := range l.byMessage {
		ds = slices.Clone(ds)
		// Stable: deliveries of one count (a claim a crash undid, then the
		// claim that replaced it) stay in the order they came.
		slices.SortStableFunc(ds, func(a, b *delivery) int { return a.count - b.count })
		for _, d := range ds {
			if d.delayedTo != nil && d.until.Add(-leaseSeconds*time.Second).Before(*d.delayedTo) {
				v.earlyDelayed++
				v.note("%s in %s: delivery %d claimed at %s, before its delay ended (%s)",
					k.id, k.queue, d.count, d.until.Add(-leaseSeconds*time.Second).Format(time.RFC3339Nano), d.delayedTo.Format(time.RFC3339Nano))
			}
		}
		for i := 1; i < len(ds); i++ {
			p, d := ds[i-1], ds[i]
			if p.count == d.count && undone(p, d) {
				continue // p's claim was undone by a crash: its lease never was (ledger.crashRedeliveries)
			}
			gaveBack := (p.action == "nack" || p.action == "release") && p.outcome != stale
			claimed := d.until.Add(-leaseSeconds * time.Second)
			if !gaveBack && claimed.Before(p.until) {
				v.earlyRedeliveries++
				v.note("%s in %s: delivery %d claimed at %s, inside delivery %d's lease (until %s; settled by %q, outcome %v)",
					k.id, k.queue, d.count, claimed.Format(time.RFC3339Nano), p.count, p.until.Format(time.RFC3339Nano), p.action, p.outcome)
			}
		}
	}
}

// note keeps the first violations for the log.
func (v *verdict) note(format string, args ...any) {
	if len(v.samples) < 20 {
		v.samples = append(v.samples, fmt.Sprintf(format, args...))
	}
}

func (v *verdict) mismatch(format string, args ...any) {
	v.auditMismatch++
	v.note(format, args...)
}

// sentBy checks that the delivery an audited settle e changed is one a
// consumer sent that settle for and was not told was stale, and marks it
// audited.
func (v *verdict) sentBy(d *delivery, e auditEvent, action string) bool {
	switch {
	case d == nil || d.action != action:
		v.mismatch("%s left %s by %s at delivery %d, which no consumer sent an %s for", e.id, e.queue, e.how, e.count, action)
	case d.outcome == stale:
		v.mismatch("%s left %s by %s at delivery %d, an %s answered as stale", e.id, e.queue, e.how, e.count, action)
	default:
		d.audited = true
		return true
	}
	return false
}

// judge settles every sent id from the audit: it must have been deleted by
// exactly one ack, and that ack must be one a consumer sent for that very
// delivery (receiveCount) and was not told was stale; every ack a consumer
// was told succeeded must be in the audit; nothing leaves the queue any
// other way. An ack whose answer was lost counts as settled only when the
// audit holds it (acks_answer_lost).
func judge(sent []string, l *ledger, events []auditEvent) verdict {
	var v verdict
	isSent := make(map[string]bool, len(sent))
	for _, id := range sent {
		isSent[id] = true
	}
	ackDeletes := map[string]int{}
	// A move deletes the message from its queue and inserts it into the
	// destination in one transaction: each delete of a move must have its
	// insert, same id, same statement, in the same transaction, and the
	// reverse.
	type moveKey struct {
		txid    int64
		id, how string
	}
	moveDeletes := map[moveKey]auditEvent{}
	moveInserts := map[moveKey]auditEvent{}
	for _, e := range events {
		if !isSent[e.id] {
			v.mismatch("%s of unsent id %q in %s by %s", e.op, e.id, e.queue, e.how)
			continue
		}
		if e.op == "insert" {
			moveInserts[moveKey{e.txid, e.id, e.how}] = e
			continue
		}
		d := l.find(e.queue, e.id, e.count)
		switch e.how {
		case howAck:
			ackDeletes[e.id]++
			if v.sentBy(d, e, "ack") && d.outcome == unknown {
				v.acksAnswerLost++
			}
		case howRequeue:
			v.requeued++
			moveDeletes[moveKey{e.txid, e.id, e.how}] = e
			v.sentBy(d, e, "requeue")
		case howDeadLetter, howNack:
			v.deadLettered++
			moveDeletes[moveKey{e.txid, e.id, e.how}] = e
			if e.count < maxReceives || e.queue == deadLetterQueue {
				v.mismatch("%s dead-lettered from %s after %d deliveries (limit %d)", e.id, e.queue, e.count, maxReceives)
			}
			if d != nil && d.action == "ack" && d.outcome == settled {
				v.mismatch("%s dead-lettered from %s after its delivery %d was acked", e.id, e.queue, e.count)
			}
		default:
			v.mismatch("%s left %s by %s (receiveCount %d)", e.id, e.queue, e.how, e.count)
		}
	}
	destination := map[string]string{howRequeue: requeueQueue, howDeadLetter: deadLetterQueue, howNack: deadLetterQueue}
	for k, e := range moveDeletes {
		in, ok := moveInserts[k]
		switch {
		case !ok:
			v.mismatch("%s left %s by %s, but did not arrive anywhere in that transaction under its id", e.id, e.queue, e.how)
		case in.queue != destination[e.how]:
			v.mismatch("%s moved by %s to %s, not %s", e.id, e.how, in.queue, destination[e.how])
		}
	}
	for k, e := range moveInserts {
		if _, ok := moveDeletes[k]; !ok {
			v.mismatch("%s arrived in %s by %s without leaving a queue in that transaction", e.id, e.queue, e.how)
		}
	}
	acksOK := map[string]int{}
	for _, ds := range l.byMessage {
		for _, d := range ds {
			switch {
			case d.queue != deadLetterQueue && d.count > maxReceives:
				v.overDelivered++
				v.note("%s delivered %d times in %s (limit %d)", d.id, d.count, d.queue, maxReceives)
			case d.action == "requeue" && d.outcome == settled && !d.audited:
				v.mismatch("requeue of %s (delivery %d in %s) answered 200, but the audit has no such move", d.id, d.count, d.queue)
			case d.action == "nack" && d.outcome == settled:
				v.nacked++
			case d.action == "release" && d.outcome == settled:
				v.released++
			}
			if d.delayedTo != nil && d.count == 1 && d.queue == queue {
				v.delayed++
			}
			if d.action == "ack" && d.outcome == settled {
				acksOK[d.id]++
				if !d.audited {
					v.mismatch("ack of %s (delivery %d in %s) answered 200, but the audit has no such deletion", d.id, d.count, d.queue)
				}
			}
		}
	}
	for _, id := range sent {
		switch {
		case ackDeletes[id] == 0:
			v.lost++
			if len(v.lostSample) < 5 {
				v.lostSample = append(v.lostSample, id)
			}
		default:
			v.acked++
			if ackDeletes[id] > 1 || acksOK[id] > 1 {
				v.doubleAcked++
			}
		}
	}
	v.checkLeases(l)
	return v
}
