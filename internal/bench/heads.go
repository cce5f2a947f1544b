package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The heads scenario (docs/PERFORMANCE.md): a receive should cost the same whatever sits
// ahead of the first available message. One client runs send → receive →
// ack cycles on three queues of the same database: one with nothing else in
// it, one behind Options.HeadsDelayed delayed messages (delay 1 h) and one
// behind Options.HeadsInFlight received ones (lease 1 h). The rounds are
// interleaved (each round runs one cycle on every queue, in rotating order),
// so load that comes and goes on the machine falls on all three alike.

const (
	// Rows ahead of the first available message.
	DefaultHeadsDelayed  = 1_000_000
	QuickHeadsDelayed    = 100_000
	DefaultHeadsInFlight = 100_000
	QuickHeadsInFlight   = 20_000
	// Measured cycles per queue, after headsWarmup unmeasured ones.
	DefaultHeadsSamples = 300
	QuickHeadsSamples   = 100
	headsWarmup         = 10

	// headsBudget bounds the measured rounds: once it has passed and at
	// least headsMinSamples rounds ran, the measurement stops early (a claim
	// that walks a million rows takes about a second on this machine).
	headsBudget       = time.Minute
	quickHeadsBudget  = 30 * time.Second
	headsMinSamples   = 50
	headsDelay        = 3600 // seconds: the delayed messages' delay and the in-flight ones' lease
	headsSendChunk    = 1000 // messages per skipq.send_batch call (its limit)
	headsReceiveChunk = 1024 // maxMessages of the in-flight fill's receives (the largest the API allows)
)

// The three queues of the scenario, in the order they are reported.
const (
	headEmpty    = "empty"
	headDelayed  = "delayed"
	headInFlight = "in_flight"
)

type headQueue struct {
	kind  string
	name  string
	ahead int
	lat   []float64 // measured cycles, ms
}

// heads fills the delayed and in-flight queues, vacuums and analyzes the
// table as a running system's vacuum would have, then measures the cycle on
// the three queues and explains one claim at each head.
func (e *env) heads(ctx context.Context) (*HeadsResult, *HeadsEvidence, error) {
	ns, err := e.startNodes(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer ns.stop()
	base := ns.at(0)
	qs := []*headQueue{
		{kind: headEmpty, name: queueName("heads-empty")},
		{kind: headDelayed, name: queueName("heads-delayed"), ahead: e.o.HeadsDelayed},
		{kind: headInFlight, name: queueName("heads-in-flight"), ahead: e.o.HeadsInFlight},
	}
	for _, q := range qs {
		if err := e.http.createQueue(ctx, base, q.name, ""); err != nil {
			return nil, nil, err
		}
	}
	ev := &HeadsEvidence{Warmup: headsWarmup, DelayedFill: "skipq.send_batch, 1,000 messages per call, delay_seconds => 3600",
		InFlightFill: "skipq.send_batch, 1,000 per call, then HTTP receives of maxMessages 1024, visibilitySeconds 3600"}
	// A database of our own is dropped at the end; in someone else's, or
	// before the backlog scenario, the fills go.
	if e.o.DatabaseURL != "" || e.o.runs(Backlog) {
		defer func() {
			e.logf("heads: removing the filled messages")
			for _, q := range qs[1:] {
				if err := e.deleteLeftovers(context.WithoutCancel(ctx), q.name); err != nil {
					e.logf("%v", err)
				}
			}
		}()
	}

	e.logf("heads: sending %d messages delayed by 1 h", e.o.HeadsDelayed)
	t0 := time.Now()
	if err := e.sendThroughSQL(ctx, qs[1].name, e.o.HeadsDelayed, headsDelay); err != nil {
		return nil, nil, fmt.Errorf("delayed fill: %w", err)
	}
	ev.DelayedFillS = round(time.Since(t0).Seconds(), 1)
	e.logf("  %.1f s (%.0f messages/s)", ev.DelayedFillS, float64(e.o.HeadsDelayed)/max(ev.DelayedFillS, 0.1))

	e.logf("heads: sending %d messages and receiving them all with a 1 h lease", e.o.HeadsInFlight)
	t0 = time.Now()
	if err := e.sendThroughSQL(ctx, qs[2].name, e.o.HeadsInFlight, 0); err != nil {
		return nil, nil, fmt.Errorf("in-flight fill: %w", err)
	}
	if err := e.leaseAll(ctx, base, qs[2].name, e.o.HeadsInFlight); err != nil {
		return nil, nil, fmt.Errorf("in-flight fill: %w", err)
	}
	ev.InFlightFillS = round(time.Since(t0).Seconds(), 1)
	e.logf("  %.1f s", ev.InFlightFillS)

	if err := e.checkHeads(ctx, qs); err != nil {
		return nil, nil, err
	}
	e.logf("heads: VACUUM ANALYZE skipq.messages")
	t0 = time.Now()
	if _, err := e.mon.Exec(ctx, monitorMark+"VACUUM ANALYZE skipq.messages"); err != nil {
		return nil, nil, fmt.Errorf("vacuum analyze: %w", err)
	}
	if e.super {
		_, _ = e.mon.Exec(ctx, monitorMark+"CHECKPOINT")
	}
	ev.VacuumS = round(time.Since(t0).Seconds(), 1)

	// The measured rounds.
	budget := headsBudget
	if e.o.Quick {
		budget = quickHeadsBudget
	}
	minSamples := min(headsMinSamples, e.o.HeadsSamples)
	e.logf("heads: %d + %d warm-up send → receive → ack cycles per queue, interleaved (at most %s once %d ran)",
		e.o.HeadsSamples, headsWarmup, budget, minSamples)
	cycles := make([]*headCycle, len(qs))
	for i, q := range qs {
		cycles[i] = newHeadCycle(e.http, base, q.name)
	}
	cpu0 := e.cpuSnapshot(ctx)
	var start time.Time
	for r := range headsWarmup + e.o.HeadsSamples {
		if r == headsWarmup {
			start = time.Now()
		}
		measured := r - headsWarmup
		if measured >= minSamples && time.Since(start) > budget {
			e.logf("  stopped after %d rounds: the %s budget is spent", measured, budget)
			break
		}
		for k := range qs {
			i := (r + k) % len(qs)
			ms, err := cycles[i].run(ctx, r)
			if err != nil {
				return nil, nil, fmt.Errorf("%s queue, cycle %d: %w", qs[i].kind, r, err)
			}
			if measured >= 0 {
				qs[i].lat = append(qs[i].lat, ms)
			}
		}
	}
	ev.Seconds = round(time.Since(start).Seconds(), 1)
	ev.CPU = cpu0.share(e.cpuSnapshot(ctx))
	e.noteCPU(ev.CPU)

	for _, q := range qs {
		slices.Sort(q.lat)
		hq := HeadsQueue{Queue: q.kind, Ahead: q.ahead, Samples: len(q.lat),
			P50: round(quantile(q.lat, 0.5), 3), P90: round(quantile(q.lat, 0.9), 3),
			P99: round(quantile(q.lat, 0.99), 3), Max: round(q.lat[len(q.lat)-1], 3)}
		if hq.Claim, err = e.explainHead(ctx, base, q.name); err != nil {
			return nil, nil, fmt.Errorf("%s queue: %w", q.kind, err)
		}
		hq.Claim.After = fmt.Sprintf("%s ahead, one message sent behind them; rolled back", headAheadText(q.kind, q.ahead))
		ev.Queues = append(ev.Queues, hq)
		e.logf("  %-9s p50 %.2f ms, claim %d buffers", q.kind, hq.P50, hq.Claim.SharedHit+hq.Claim.SharedRead)
	}
	res := &HeadsResult{
		DelayedCount: e.o.HeadsDelayed, InFlightCount: e.o.HeadsInFlight,
		EmptyP50MS: ev.Queues[0].P50, DelayedP50MS: ev.Queues[1].P50, InFlightP50MS: ev.Queues[2].P50,
	}
	if res.EmptyP50MS > 0 {
		res.DelayedRatio = round(res.DelayedP50MS/res.EmptyP50MS, 2)
		res.InFlightRatio = round(res.InFlightP50MS/res.EmptyP50MS, 2)
	}
	e.logf("  ratios: delayed %.2f, in flight %.2f", res.DelayedRatio, res.InFlightRatio)
	return res, ev, nil
}

func headAheadText(kind string, n int) string {
	switch kind {
	case headDelayed:
		return thousands(float64(n)) + " delayed (1 h)"
	case headInFlight:
		return thousands(float64(n)) + " in flight (1 h lease)"
	}
	return "nothing"
}

// sendThroughSQL sends n messages of the bench's payload to a queue through
// skipq's own SQL API, skipq.send_batch, 1,000 per call on two connections,
// so every row is exactly what a send makes (sequence, id, visible_at,
// delayed_to, max_receive_count …) whatever the messages table looks like.
// On this 2-core machine's private cluster, with other load on it:
// 1,000,000 messages in 51 s, about 20,000/s (one INSERT … SELECT
// generate_series, as the backlog preloads, takes ~6 s but would have to
// follow every change to the messages table by hand).
func (e *env) sendThroughSQL(ctx context.Context, queue string, n, delaySeconds int) error {
	const conns = 2
	pool, err := newPool(ctx, e.dbURL, setupApp, conns)
	if err != nil {
		return err
	}
	defer pool.Close()
	bodies := make([]string, headsSendChunk)
	for i := range bodies {
		bodies[i] = payload
	}
	chunks := make(chan int, conns)
	go func() {
		defer close(chunks)
		for left := n; left > 0; left -= headsSendChunk {
			select {
			case chunks <- min(left, headsSendChunk):
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, conns)
	for w := range conns {
		wg.Go(func() {
			for size := range chunks {
				if errs[w] != nil {
					continue // drain
				}
				errs[w] = sendBatchSQL(ctx, pool, queue, bodies[:size], delaySeconds)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

func sendBatchSQL(ctx context.Context, pool *pgxpool.Pool, queue string, bodies []string, delaySeconds int) error {
	var sent int
	err := pool.QueryRow(ctx, `SELECT count(*)::int FROM skipq.send_batch($1::text, $2::text[], delay_seconds => $3::int)`,
		queue, bodies, delaySeconds).Scan(&sent)
	if err == nil && sent != len(bodies) {
		err = fmt.Errorf("skipq.send_batch sent %d of %d", sent, len(bodies))
	}
	return err
}

// leaseAll receives n messages from a queue over HTTP, 1,024 at a time with
// a one-hour lease, as a consumer that took them and is still working would
// have: each is leased exactly as a receive leases it. While a claim walks
// past leased messages, each receive here walks past all the earlier ones:
// 100,000 take ~50 s today, a few seconds once the claim no longer does.
func (e *env) leaseAll(ctx context.Context, base, queue string, n int) error {
	c := e.http
	u := queuePath(base, queue) + "/messages/receive"
	body := []byte(`{"maxMessages":` + strconv.Itoa(headsReceiveChunk) + `,"waitSeconds":0,"visibilitySeconds":` + strconv.Itoa(headsDelay) + `}`)
	for got := 0; got < n; {
		var out struct {
			Messages []struct{} `json:"messages"`
		}
		if err := c.do(ctx, http.MethodPost, u, body, http.StatusOK, &out); err != nil {
			return err
		}
		if len(out.Messages) == 0 {
			return fmt.Errorf("a receive found nothing after %d of %d messages", got, n)
		}
		got += len(out.Messages)
	}
	return nil
}

// checkHeads verifies what the fills left: every message of the delayed
// queue not yet due, every message of the in-flight queue leased, and none
// available in any of the three queues.
func (e *env) checkHeads(ctx context.Context, qs []*headQueue) error {
	for _, q := range qs {
		var total, available, leased, delayed int
		err := e.mon.QueryRow(ctx, monitorMark+`SELECT count(*)::int,
       count(*) FILTER (WHERE m.visible_at <= now())::int,
       count(*) FILTER (WHERE m.lease_token IS NOT NULL AND m.visible_at > now())::int,
       count(*) FILTER (WHERE m.delayed_to > now() AND m.receive_count = 0)::int
FROM skipq.messages m WHERE m.queue_id = (SELECT id FROM skipq.queues WHERE name = $1)`, q.name).Scan(&total, &available, &leased, &delayed)
		if err != nil {
			return fmt.Errorf("check %s queue: %w", q.kind, err)
		}
		want := map[string]int{headEmpty: 0, headDelayed: delayed, headInFlight: leased}[q.kind]
		if total != q.ahead || want != q.ahead || available != 0 {
			return fmt.Errorf("%s queue holds %d messages (%d available, %d leased, %d delayed), want %d ahead and none available",
				q.kind, total, available, leased, delayed, q.ahead)
		}
	}
	return nil
}

// headCycle is one send → receive → ack cycle over HTTP on one queue.
type headCycle struct {
	c       *client
	sendURL string
	recv    *receiver
}

func newHeadCycle(c *client, base, queue string) *headCycle {
	return &headCycle{c: c, sendURL: queuePath(base, queue) + "/messages", recv: newReceiver(c, base, queue, 1, 0)}
}

// run sends one message, receives (maxMessages 1, waitSeconds 0) and acks
// it, and returns the cycle's wall time in milliseconds. The receive must
// return that very message: anything else means the claim missed the
// queue's only available message.
func (h *headCycle) run(ctx context.Context, i int) (float64, error) {
	body := "heads-" + strconv.Itoa(i)
	t0 := time.Now()
	if err := h.c.do(ctx, http.MethodPost, h.sendURL, []byte(`{"body":"`+body+`"}`), http.StatusCreated, nil); err != nil {
		return 0, err
	}
	got, err := h.recv.receive(ctx)
	if err != nil {
		return 0, err
	}
	if len(got.Messages) != 1 || got.Messages[0].Body != body {
		bodies := make([]string, len(got.Messages))
		for j, m := range got.Messages {
			bodies[j] = m.Body
		}
		return 0, fmt.Errorf("receive right after sending %q returned %d messages %q, want exactly that one", body, len(got.Messages), bodies)
	}
	n, err := h.recv.ack(ctx, []string{got.Messages[0].ReceiptHandle})
	if err != nil {
		return 0, err
	}
	if n != 1 {
		return 0, fmt.Errorf("ack of a fresh receipt handle settled %d messages", n)
	}
	return float64(time.Since(t0).Microseconds()) / 1000, nil
}

// explainHead sends one message to the queue, explains skipq's claim of it
// (skipq's plan settings, in a transaction rolled back afterwards) and then
// receives and acks it over HTTP, leaving the queue as it was.
func (e *env) explainHead(ctx context.Context, base, queue string) (*Explain, error) {
	c := e.http
	h := newHeadCycle(c, base, queue)
	body := "heads-explain"
	if err := c.do(ctx, http.MethodPost, h.sendURL, []byte(`{"body":"`+body+`"}`), http.StatusCreated, nil); err != nil {
		return nil, err
	}
	x, err := e.explainClaimRolledBack(ctx, queue, 1)
	if err != nil {
		return nil, err
	}
	if x.Rows != 1 {
		return nil, fmt.Errorf("explained claim returned %d rows, want the one message just sent", x.Rows)
	}
	got, err := h.recv.receive(ctx)
	if err != nil {
		return nil, err
	}
	if len(got.Messages) != 1 || got.Messages[0].Body != body {
		return nil, fmt.Errorf("receive after the explain returned %d messages, want the one sent", len(got.Messages))
	}
	if _, err := h.recv.ack(ctx, []string{got.Messages[0].ReceiptHandle}); err != nil {
		return nil, err
	}
	return x, nil
}

// HeadsResult is the heads object of docs/PERFORMANCE.md, exactly its keys: the p50 of a
// send → receive → ack cycle on an empty queue, behind delayed_count delayed
// messages and behind in_flight_count in-flight ones, and the two ratios to
// the empty queue's p50. What backs the figures is in HeadsEvidence.
type HeadsResult struct {
	DelayedCount  int     `json:"delayed_count"`
	InFlightCount int     `json:"in_flight_count"`
	EmptyP50MS    float64 `json:"empty_p50_ms"`
	DelayedP50MS  float64 `json:"delayed_p50_ms"`
	InFlightP50MS float64 `json:"in_flight_p50_ms"`
	DelayedRatio  float64 `json:"delayed_ratio"`
	InFlightRatio float64 `json:"in_flight_ratio"`
}

// HeadsEvidence is how the heads figures were made: the fills, the rounds,
// each queue's distribution and one claim at each head.
type HeadsEvidence struct {
	DelayedFill   string       `json:"delayed_fill"`
	DelayedFillS  float64      `json:"delayed_fill_s"`
	InFlightFill  string       `json:"in_flight_fill"`
	InFlightFillS float64      `json:"in_flight_fill_s"`
	VacuumS       float64      `json:"vacuum_analyze_s"` // VACUUM ANALYZE skipq.messages (and CHECKPOINT) after the fills
	Warmup        int          `json:"warmup_cycles"`    // per queue, unmeasured
	Seconds       float64      `json:"seconds"`          // the measured rounds
	Queues        []HeadsQueue `json:"queues"`           // empty, delayed, in_flight
	CPU           CPUShare     `json:"cpu"`
}

// HeadsQueue is one queue's cycles, in ms.
type HeadsQueue struct {
	Queue   string   `json:"queue"` // empty, delayed or in_flight
	Ahead   int      `json:"ahead"` // messages ahead of the cycle's
	Samples int      `json:"samples"`
	P50     float64  `json:"p50_ms"`
	P90     float64  `json:"p90_ms"`
	P99     float64  `json:"p99_ms"`
	Max     float64  `json:"max_ms"`
	Claim   *Explain `json:"claim"` // skipq's claim of one message sent behind the head
}

func writeHeads(w io.Writer, h *HeadsResult, ev *HeadsEvidence) {
	fmt.Fprintf(w, "heads: send → receive → ack cycle, one client, rounds interleaved over three queues\n")
	if ev == nil {
		fmt.Fprintf(w, "  p50 %.2f ms empty, %.2f ms behind %s delayed (%.2f), %.2f ms behind %s in flight (%.2f)\n\n",
			h.EmptyP50MS, h.DelayedP50MS, thousands(float64(h.DelayedCount)), h.DelayedRatio,
			h.InFlightP50MS, thousands(float64(h.InFlightCount)), h.InFlightRatio)
		return
	}
	fmt.Fprintf(w, "  %-10s %10s %8s %8s %8s %8s %7s  %s\n", "queue", "ahead", "cycles", "p50 ms", "p90 ms", "p99 ms", "ratio", "claim of one (EXPLAIN ANALYZE, skipq's plan)")
	for _, q := range ev.Queues {
		ratio := "-"
		switch q.Queue {
		case headDelayed:
			ratio = fmt.Sprintf("%.2f", h.DelayedRatio)
		case headInFlight:
			ratio = fmt.Sprintf("%.2f", h.InFlightRatio)
		}
		claim := ""
		if x := q.Claim; x != nil {
			claim = fmt.Sprintf("%.3f ms, %s buffers (%d hit + %d read)", x.ExecutionMS, thousands(float64(x.SharedHit+x.SharedRead)), x.SharedHit, x.SharedRead)
		}
		fmt.Fprintf(w, "  %-10s %10s %8d %8.2f %8.2f %8.2f %7s  %s\n", q.Queue, thousands(float64(q.Ahead)), q.Samples, q.P50, q.P90, q.P99, ratio, claim)
	}
	fmt.Fprintf(w, "  fills: %s delayed in %.1f s (%s); %s in flight in %.1f s (%s); VACUUM ANALYZE %.1f s\n\n",
		thousands(float64(h.DelayedCount)), ev.DelayedFillS, ev.DelayedFill, thousands(float64(h.InFlightCount)), ev.InFlightFillS, ev.InFlightFill, ev.VacuumS)
}
