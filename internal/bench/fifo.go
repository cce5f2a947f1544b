package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/skipq/skipq/internal/service"
)

// fifoGroups is how many groups the FIFO lifecycle keeps active.
const fifoGroups = 1000

// fifoPoints are the points the FIFO lifecycle is compared at (issue #13).
var fifoPoints = []Point{{Batch: 1, Pairs: 16}, {Batch: 100, Pairs: 4}}

// fifoBatchGroups is how many groups one batch send of the FIFO lifecycle
// names: a batch may name at most service.MaxBatchGroups.
const fifoBatchGroups = 50

// fifo measures FIFO queues against the standard queue in the same run:
// the lifecycle over HTTP with fifoGroups active groups and
// maxMessagesPerGroup 1 next to the standard lifecycle at the same points;
// the receive that must pass a group of a million messages whose head is
// in flight (with EXPLAIN of its claim); and the wake-up of a group's next
// message by the ack that frees the group, the receiver waiting on another
// node.
func (e *env) fifo(ctx context.Context) (*FIFOResult, error) {
	ns, err := e.startNodes(ctx)
	if err != nil {
		return nil, err
	}
	defer ns.stop()
	res := &FIFOResult{Groups: fifoGroups}
	for _, p := range fifoPoints {
		fp := FIFOPoint{Batch: p.Batch, Pairs: p.Pairs}
		std := queueName(fmt.Sprintf("fifo-standard-b%d-p%d", p.Batch, p.Pairs))
		if err := e.http.createQueue(ctx, ns.at(0), std, ""); err != nil {
			return res, err
		}
		e.checkpoint(ctx)
		e.logf("fifo: standard lifecycle batch %d × %d pairs over HTTP", p.Batch, p.Pairs)
		if fp.StandardMsgsPerS, fp.Standard, err = e.drive(ctx, newHTTPWorkload(e.http, ns, std, p, e.o.ConsumerShape), p, nil); err != nil {
			return res, fmt.Errorf("standard batch %d × %d: %w", p.Batch, p.Pairs, err)
		}
		fq := queueName(fmt.Sprintf("fifo-b%d-p%d", p.Batch, p.Pairs))
		if err := e.http.createQueue(ctx, ns.at(0), fq, `{"fifo":true}`); err != nil {
			return res, err
		}
		e.checkpoint(ctx)
		e.logf("fifo: FIFO lifecycle batch %d × %d pairs over HTTP, %d groups", p.Batch, p.Pairs, fifoGroups)
		if fp.FIFOMsgsPerS, fp.FIFO, err = e.drive(ctx, newFIFOWorkload(e.http, ns, fq, p, e.o.ConsumerShape), p, nil); err != nil {
			return res, fmt.Errorf("FIFO batch %d × %d: %w", p.Batch, p.Pairs, err)
		}
		fp.StandardMsgsPerS, fp.FIFOMsgsPerS = round(fp.StandardMsgsPerS, 0), round(fp.FIFOMsgsPerS, 0)
		if fp.StandardMsgsPerS > 0 {
			fp.Ratio = round(fp.FIFOMsgsPerS/fp.StandardMsgsPerS, 3)
		}
		e.logf("  standard %.0f msgs/s, FIFO %.0f msgs/s, ratio %.2f", fp.StandardMsgsPerS, fp.FIFOMsgsPerS, fp.Ratio)
		switch p {
		case Point{Batch: 1, Pairs: 16}:
			res.B1x16Ratio = fp.Ratio
		case Point{Batch: 100, Pairs: 4}:
			res.B100x4Ratio = fp.Ratio
		}
		res.Points = append(res.Points, fp)
	}
	if err := e.fifoHeadOfLine(ctx, ns, res); err != nil {
		return res, err
	}
	if err := e.fifoGroupWake(ctx, ns, res); err != nil {
		return res, err
	}
	return res, nil
}

// fifoWorkload is the HTTP lifecycle on a FIFO queue: sends spread over
// fifoGroups groups, receives take one message per group.
type fifoWorkload struct {
	*httpWorkload
	batch int
	calls []atomic.Int64 // per producer
}

func newFIFOWorkload(c *client, ns *nodes, queue string, p Point, shape ConsumerShape) *fifoWorkload {
	w := &fifoWorkload{httpWorkload: newHTTPWorkload(c, ns, queue, p, shape), batch: p.Batch, calls: make([]atomic.Int64, p.Pairs)}
	for _, r := range w.receivers {
		perGroup := `{"maxMessages":` + strconv.Itoa(p.Batch) + `,"maxMessagesPerGroup":1`
		r.body = []byte(perGroup + `,"waitSeconds":1}`)
		r.ackBody = []byte(perGroup + `,"waitSeconds":0,"ack":`)
	}
	return w
}

// produce sends one batch: a single message to the next group of this
// producer's rotation, or a batch over fifoBatchGroups consecutive groups.
func (w *fifoWorkload) produce(ctx context.Context, i int) (int, error) {
	s := w.senders[i]
	k := int(w.calls[i].Add(1))
	if w.batch == 1 {
		g := (i*(fifoGroups/len(w.senders)) + k) % fifoGroups
		body := `{"body":"` + payload + `","groupId":"g` + strconv.Itoa(g) + `"}`
		return 1, s.c.do(ctx, http.MethodPost, s.url, []byte(body), http.StatusCreated, nil)
	}
	base := (i*(fifoGroups/len(w.senders)) + k*fifoBatchGroups) % fifoGroups
	var b strings.Builder
	b.WriteString(`{"messages":[`)
	for j := range w.batch {
		if j > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"body":"` + payload + `","groupId":"g` + strconv.Itoa((base+j%fifoBatchGroups)%fifoGroups) + `"}`)
	}
	b.WriteString(`]}`)
	return w.batch, s.c.do(ctx, http.MethodPost, s.url, []byte(b.String()), http.StatusCreated, nil)
}

// holMessages is how many messages the blocked group holds.
func (e *env) holMessages() int {
	if e.o.Quick {
		return 100_000
	}
	return 1_000_000
}

// fifoHeadOfLine fills one group with holMessages messages and leases its
// head, then times receives that must pass it for another group's single
// message (docs/FIFO.md), and explains that claim.
func (e *env) fifoHeadOfLine(ctx context.Context, ns *nodes, res *FIFOResult) error {
	q := queueName("fifo-hol")
	base := ns.at(0)
	if err := e.http.createQueue(ctx, base, q, `{"fifo":true}`); err != nil {
		return err
	}
	n := e.holMessages()
	e.logf("fifo: head of line: filling one group with %d messages", n)
	_, err := e.mon.Exec(ctx, monitorMark+`WITH q AS (SELECT id FROM skipq.queues WHERE name = $1),
ins AS (
    INSERT INTO skipq.messages (queue_id, message_id, body, sent_at, visible_at, max_receive_count, ready, group_id)
    SELECT q.id, 'hol-' || g, convert_to($3, 'UTF8'), now(), now(), 10, true, 'big'
    FROM q, generate_series(1, $2::integer) g
    RETURNING queue_id, sequence)
INSERT INTO skipq.ready (queue_id, sequence) SELECT queue_id, sequence FROM ins`, q, n, payload)
	if err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	if _, err := e.mon.Exec(ctx, monitorMark+`INSERT INTO skipq.message_groups (queue_id, group_id)
SELECT id, 'big' FROM skipq.queues WHERE name = $1`, q); err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	if _, err := e.mon.Exec(ctx, monitorMark+"ANALYZE skipq.messages, skipq.message_groups"); err != nil {
		return err
	}
	lease := newReceiver(e.http, base, q, 1, 0)
	lease.body = []byte(`{"maxMessages":1,"waitSeconds":0,"visibilitySeconds":3600}`)
	head, err := lease.receive(ctx)
	if err != nil || len(head.Messages) != 1 {
		return fmt.Errorf("lease the big group's head: %v (%d messages)", err, len(head.Messages))
	}

	send := []byte(`{"body":"` + payload + `","groupId":"small"}`)
	r := newReceiver(e.http, base, q, 1, 0)
	var lat []float64
	samples := min(e.o.LatencySamples, 200)
	for i := range samples + 10 {
		if err := e.http.do(ctx, http.MethodPost, queuePath(base, q)+"/messages", send, http.StatusCreated, nil); err != nil {
			return err
		}
		if i == 5 {
			if res.HOLExplain, err = e.explainGroupedClaim(ctx, q); err != nil {
				return err
			}
		}
		t0 := time.Now()
		got, err := r.receive(ctx)
		d := time.Since(t0)
		if err != nil {
			return err
		}
		if len(got.Messages) != 1 {
			return fmt.Errorf("head of line: a receive got %d messages, want the small group's one", len(got.Messages))
		}
		if i >= 10 {
			lat = append(lat, d.Seconds()*1000)
		}
		if _, err := r.ack(ctx, []string{got.Messages[0].ReceiptHandle}); err != nil {
			return err
		}
	}
	slices.Sort(lat)
	res.HOLMessages = n
	res.HOLP50MS = round(quantile(lat, 0.5), 2)
	res.HOLBuffers = res.HOLExplain.SharedHit + res.HOLExplain.SharedRead
	e.logf("  receive past a %d-message group in flight: p50 %.2f ms, claim %d buffers", n, res.HOLP50MS, res.HOLBuffers)
	return nil
}

// explainGroupedClaim is EXPLAIN (ANALYZE, BUFFERS) of a receive's claim on
// a FIFO queue (one message), in a transaction rolled back. The function's
// buffers include its statements'.
func (e *env) explainGroupedClaim(ctx context.Context, queue string) (*Explain, error) {
	tx, err := e.mon.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	sql := `SELECT * FROM skipq.message_claim_grouped('default', $1, NULL, NULL, 1, 1, $2, $3, $4)`
	budget, overhead := int64(service.DefaultLimits().MaxResponseBytes), int64(service.MessageOverheadBytes+len(queue))
	// The first call on a connection compiles the function and plans each
	// of its statements as it first runs: not the claim's cost (a node's
	// connections pay it once). So one claim first, undone.
	if _, err := tx.Exec(ctx, "SAVEPOINT warm"); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, sql, queue, budget, overhead, "claim"); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT warm"); err != nil {
		return nil, err
	}
	x, err := explain(ctx, tx, sql, []any{queue, budget, overhead, "claim"})
	if err != nil {
		return nil, err
	}
	x.MaxMessages = 1
	x.After = fmt.Sprintf("one group of %d messages, its head in flight, and one other group", e.holMessages())
	return x, nil
}

// fifoGroupWake times the wake-up of a group's next message: a receiver
// waits (on another node when there are several) while the group's batch
// is in flight; each sample is the time from the response of the ack that
// frees the group to the waiting receive's response.
func (e *env) fifoGroupWake(ctx context.Context, ns *nodes, res *FIFOResult) error {
	q := queueName("fifo-wake")
	base, recvNode := ns.at(0), ns.at(0)
	res.GroupWakePath = "same node"
	if len(ns.urls) > 1 {
		recvNode, res.GroupWakePath = ns.at(1), "across nodes (NOTIFY)"
	}
	if err := e.http.createQueue(ctx, base, q, `{"fifo":true}`); err != nil {
		return err
	}
	sendOne := func(i int) error {
		body := []byte(`{"body":"wake-` + strconv.Itoa(i) + `","groupId":"w"}`)
		return e.http.do(ctx, http.MethodPost, queuePath(base, q)+"/messages", body, http.StatusCreated, nil)
	}
	if err := sendOne(0); err != nil {
		return err
	}
	holder := newReceiver(e.http, base, q, 1, 0)
	held, err := holder.receive(ctx)
	if err != nil || len(held.Messages) != 1 {
		return fmt.Errorf("group wake: first receive: %v", err)
	}
	waiter := newReceiver(e.http, recvNode, q, 1, 20)
	samples := min(e.o.LatencySamples, 200)
	e.logf("fifo: group wake-up, %d samples, receiver %s", samples, res.GroupWakePath)
	var lat []float64
	for i := 1; i <= samples+5; i++ {
		if err := sendOne(i); err != nil {
			return err
		}
		type answer struct {
			at  time.Time
			got *receiveResponse
			err error
		}
		ch := make(chan answer, 1)
		go func() {
			got, err := waiter.receive(ctx)
			ch <- answer{time.Now(), got, err}
		}()
		if err := e.waitForWaiters(ctx, []string{recvNode}, 1, 30*time.Second); err != nil {
			return err
		}
		if _, err := holder.ack(ctx, []string{held.Messages[0].ReceiptHandle}); err != nil {
			return err
		}
		acked := time.Now()
		a := <-ch
		if a.err != nil {
			return a.err
		}
		if len(a.got.Messages) != 1 || a.got.Messages[0].Body != "wake-"+strconv.Itoa(i) {
			return fmt.Errorf("group wake sample %d: the waiting receive got %+v", i, a.got.Messages)
		}
		if i > 5 {
			lat = append(lat, max(0, a.at.Sub(acked).Seconds()*1000))
		}
		held = a.got
	}
	slices.Sort(lat)
	res.GroupWakeP50MS = round(quantile(lat, 0.5), 2)
	res.GroupWakeP99MS = round(quantile(lat, 0.99), 2)
	res.GroupWakeSamples = len(lat)
	e.logf("  group wake-up p50 %.2f ms, p99 %.2f ms", res.GroupWakeP50MS, res.GroupWakeP99MS)
	return nil
}

// FIFOResult is the FIFO scenario (issue #13): FIFO lifecycle / standard
// lifecycle in the same run, the receive past a blocked group, the wake-up
// of a group's next message.
type FIFOResult struct {
	B1x16Ratio       float64     `json:"b1x16_ratio"`
	B100x4Ratio      float64     `json:"b100x4_ratio"`
	HOLP50MS         float64     `json:"hol_p50_ms"`
	HOLBuffers       int64       `json:"hol_buffers"`
	GroupWakeP50MS   float64     `json:"group_wake_p50_ms"`
	GroupWakeP99MS   float64     `json:"group_wake_p99_ms"`
	Groups           int         `json:"groups"` // active groups of the FIFO lifecycle
	Points           []FIFOPoint `json:"points"`
	HOLMessages      int         `json:"hol_messages"` // in the blocked group
	HOLExplain       *Explain    `json:"hol_explain"`
	GroupWakeSamples int         `json:"group_wake_samples"`
	GroupWakePath    string      `json:"group_wake_path"`
}

// FIFOPoint is one point of the FIFO lifecycle next to the standard one.
type FIFOPoint struct {
	Batch            int       `json:"batch"`
	Pairs            int       `json:"pairs"`
	StandardMsgsPerS float64   `json:"standard_msgs_per_s"`
	FIFOMsgsPerS     float64   `json:"fifo_msgs_per_s"`
	Ratio            float64   `json:"ratio"`
	Standard         *RunStats `json:"standard_stats,omitempty"`
	FIFO             *RunStats `json:"fifo_stats,omitempty"`
}

// writeFIFO is the FIFO section of the text report.
func writeFIFO(w io.Writer, f *FIFOResult) {
	fmt.Fprintf(w, "FIFO queues (%d active groups, maxMessagesPerGroup 1) next to the standard queue, messages/s acked:\n", f.Groups)
	for _, p := range f.Points {
		fmt.Fprintf(w, "  batch %3d × %2d pairs: standard %10s  FIFO %10s  FIFO/standard %.2f\n",
			p.Batch, p.Pairs, thousands(p.StandardMsgsPerS), thousands(p.FIFOMsgsPerS), p.Ratio)
	}
	fmt.Fprintf(w, "  receive past a %s-message group whose head is in flight: p50 %.2f ms; its claim read %d buffers\n",
		thousands(float64(f.HOLMessages)), f.HOLP50MS, f.HOLBuffers)
	if x := f.HOLExplain; x != nil {
		for _, line := range x.Plan {
			fmt.Fprintf(w, "    %s\n", line)
		}
	}
	fmt.Fprintf(w, "  group wake-up (freeing ack answered → waiting receive answered, %s), %d samples: p50 %.2f ms   p99 %.2f ms\n\n",
		f.GroupWakePath, f.GroupWakeSamples, f.GroupWakeP50MS, f.GroupWakeP99MS)
}
