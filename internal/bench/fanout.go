package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/migrations"
	"github.com/skipq/skipq/internal/node"
)

// fanoutPoints are the points of the topics contract's targets.
var fanoutPoints = []Point{{Batch: 1, Pairs: 16}, {Batch: 100, Pairs: 4}}

// fanoutGroups are the subscription counts measured; the ratios are of the
// largest.
var fanoutGroups = []int{1, 10}

const (
	fanoutBodyBytes     = 1024
	fanoutConsumers     = 2 // per group, and on the plain queue
	fanoutStorageN      = 2000
	fanoutWakeSamples   = 20
	fanoutPublishTarget = 0.5
	fanoutDrainTarget   = 0.8
	fanoutStorageTarget = 3.0
	fanoutWakeTarget    = 5.0
	fanoutReplayTarget  = 0.8
	// fanoutReplayRetained is how many retained messages a replay goes
	// through while publishers publish (--quick: fanoutReplayQuick;
	// Options.ReplayRetained, --replay-retained, sets any other).
	fanoutReplayRetained = 1_000_000
	fanoutReplayQuick    = 20_000
	// fanoutRetainBatch is how many retained messages one statement of the
	// replay's fill writes.
	fanoutRetainBatch = 100_000
)

// fanoutBody is every fan-out message's body: 1 KiB of text.
var fanoutBody = strings.Repeat("skipq-fanout-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNO", fanoutBodyBytes/64)

// fanout measures topics (the topics contract's targets): messages
// published per second with 1 and 10 subscriptions next to sends to one
// queue, how fast each group drains next to a plain queue with the same
// consumers, the storage of a published message next to a sent one, and
// how soon a publish wakes a receiver waiting on each group.
func (e *env) fanout(ctx context.Context) (*FanoutResult, error) {
	ns, err := e.startNodes(ctx)
	if err != nil {
		return nil, err
	}
	defer ns.stop()
	base := ns.at(0)
	res := &FanoutResult{}
	// Storage first, in a database of its own (fanoutStorage).
	if err := e.fanoutStorage(ctx, base, res); err != nil {
		return res, err
	}
	for _, p := range fanoutPoints {
		fp := FanoutPoint{Batch: p.Batch, Publishers: p.Pairs}
		plain := queueName(fmt.Sprintf("fanout-plain-b%d", p.Batch))
		if err := e.http.createQueue(ctx, base, plain, ""); err != nil {
			return res, err
		}
		// Each send and publish window, as each drain window
		// (fanoutDrains), starts from a checkpoint: the point before
		// deleted its leftovers (at batch 100 a million messages and
		// more), and their vacuum is not the next window's to pay (a
		// trial that also deleted the one-group topic's bodies ran the
		// publishes to ten groups at 0.39 of sends).
		e.checkpoint(ctx)
		e.logf("fanout: sends to one queue, batch %d × %d", p.Batch, p.Pairs)
		if fp.SendMsgsPerS, _, err = e.publishWindow(ctx, queuePath(base, plain)+"/messages"+batchSuffix(p.Batch), p); err != nil {
			return res, err
		}
		e.logf("  %.0f msgs/s; its drain by %d consumers", fp.SendMsgsPerS, fanoutConsumers)
		if fp.PlainDrainMsgsPerS, _, err = e.drainWindow(ctx, base, []string{plain}, p.Batch, nil); err != nil {
			return res, err
		}
		e.logf("  %.0f msgs/s", fp.PlainDrainMsgsPerS)
		if err := e.deleteLeftovers(ctx, plain); err != nil {
			return res, err
		}
		for _, n := range fanoutGroups {
			topic := queueName(fmt.Sprintf("fanout-b%d-s%d", p.Batch, n))
			groups, err := e.createTopic(ctx, base, topic, n)
			if err != nil {
				return res, err
			}
			e.logf("fanout: publishes to %d subscriptions, batch %d × %d", n, p.Batch, p.Pairs)
			topicURL := base + "/v1/topics/" + url.PathEscape(topic) + "/messages"
			e.checkpoint(ctx)
			rate, published, err := e.publishWindow(ctx, topicURL, p)
			if err != nil {
				return res, err
			}
			fs := FanoutSubs{Subscriptions: n, PublishMsgsPerS: round(rate, 0)}
			if fp.SendMsgsPerS > 0 {
				fs.PublishRatio = round(rate/fp.SendMsgsPerS, 3)
			}
			// The drain's rounds need a backlog the publish window may not
			// have left: at batch 100 one group drains about as fast as
			// it was published, and its drain ran one round where the
			// others ran three, its ratio that one pair of windows'
			// (0.76-1.05 over seven runs). Unmeasured publishes top it
			// up to what the rounds take, estimated from the plain
			// queue's drain rate shared by n queues, with a quarter to
			// spare.
			if need := int(1.25 * float64(fanoutDrainRounds+1) * fp.PlainDrainMsgsPerS / float64(n) *
				(e.o.Warmup + e.o.Duration).Seconds()); published < need {
				if err := e.fill(ctx, []string{topicURL}, need-published, func(u string, _ int) string { return u }); err != nil {
					return res, err
				}
				e.logf("  topped up with %d unmeasured publishes, for the drain's rounds", need-published)
				published = need
			}
			// The groups' drain next to the same drain of as many plain
			// queues, each holding as many messages as a group got: n
			// groups share the machine, and a plain queue drained alone
			// is not what they compete with.
			plains := make([]string, n)
			for i := range plains {
				plains[i] = queueName(fmt.Sprintf("fanout-plain-b%d-s%d-q%d", p.Batch, n, i))
			}
			if err := e.fillQueues(ctx, base, plains, published); err != nil {
				return res, err
			}
			if err := e.fanoutDrains(ctx, base, groups, plains, published, p.Batch, &fs); err != nil {
				return res, err
			}
			for _, q := range append(groups, plains...) {
				if err := e.deleteLeftovers(ctx, q); err != nil {
					return res, err
				}
			}
			e.logf("  %.0f published msgs/s (%.2f of sends), each group drains %.0f msgs/s, each of %d plain queues drained in turns with them %.0f (medians; ratio %.2f, the median of %v)",
				fs.PublishMsgsPerS, fs.PublishRatio, fs.GroupDrainMsgsPerS, n, fs.PlainDrainMsgsPerS, fs.DrainRatio, fs.DrainRatios)
			fp.Subs = append(fp.Subs, fs)
		}
		fp.SendMsgsPerS, fp.PlainDrainMsgsPerS = round(fp.SendMsgsPerS, 0), round(fp.PlainDrainMsgsPerS, 0)
		res.Points = append(res.Points, fp)
	}
	// The publish ratios are those with 10 subscriptions (the last count);
	// every group drains at 80 % of the plain queues' rate with any
	// count, so the drain ratio is the least of all.
	for _, fp := range res.Points {
		last := fp.Subs[len(fp.Subs)-1]
		switch {
		case fp.Batch == 1:
			res.PublishRatioB1x16 = last.PublishRatio
		default:
			res.PublishRatioB100x4 = last.PublishRatio
		}
		for _, s := range fp.Subs {
			if res.DrainRatioMin == 0 || s.DrainRatio < res.DrainRatioMin {
				res.DrainRatioMin = s.DrainRatio
			}
		}
	}
	// The wake-up is a latency of an idle node: the drains before leave
	// dead rows whose vacuum, and dirty pages whose checkpoint, ran during
	// some runs' samples and not others'.
	e.checkpoint(ctx)
	if res.WakeP50MS, err = e.fanoutWake(ctx, base); err != nil {
		return res, err
	}
	if res.Replay, err = e.fanoutReplay(ctx, base); err != nil {
		return res, err
	}
	return res, nil
}

// fanoutReplay measures publishes at batch 100 × 4 to a topic that retains
// its messages and has one live group, without and then during the replay
// of Options.ReplayRetained retained messages to a new subscription (the
// topics contract: a replay must not block publishers). The retained
// messages are written in SQL, as publishes to the topic before the replay
// would have left them: a body and a retained row each.
func (e *env) fanoutReplay(ctx context.Context, base string) (*FanoutReplay, error) {
	retained := e.o.ReplayRetained
	topic := queueName("fanout-replay")
	tu := base + "/v1/topics/" + url.PathEscape(topic)
	if err := e.http.do(ctx, http.MethodPut, tu, []byte(`{"retainSeconds": 86400}`), http.StatusCreated, nil); err != nil {
		return nil, fmt.Errorf("create topic %s: %w", topic, err)
	}
	live := topic + "-live"
	if err := e.http.do(ctx, http.MethodPut, tu+"/subscriptions/"+url.PathEscape(live), nil, http.StatusCreated, nil); err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", live, err)
	}
	e.logf("fanout: %d retained messages for a replay", retained)
	from := time.Now().Add(-time.Hour)
	filled := time.Now()
	for done := 0; done < retained; done += fanoutRetainBatch {
		if _, err := e.mon.Exec(ctx, monitorMark+`
WITH t AS (SELECT id FROM skipq.topics WHERE name = $1),
     b AS (
    INSERT INTO skipq.topic_bodies (id, topic_id, message_id, body, published_at, window_ends, delivered_to)
    SELECT nextval('skipq.topic_body_sequence'), t.id, 'retained-' || g, convert_to($2, 'UTF8'),
           $3::timestamptz + g * interval '1 ms', $3::timestamptz, 0
    FROM t, generate_series($4::integer + 1, $5::integer) g
    RETURNING id, topic_id, message_id, published_at)
INSERT INTO skipq.topic_retained (topic_id, id, message_id, published_at, client_id, metadata, body_binary, tags,
                                  expiration_seconds, max_receive_count)
SELECT topic_id, id, message_id, published_at, '', '', false, '{}', -1, 0 FROM b`,
			topic, fanoutBody, from, done, min(done+fanoutRetainBatch, retained)); err != nil {
			return nil, fmt.Errorf("retain %d messages: %w", retained, err)
		}
	}
	// The fill is setup: its dirty pages, and the vacuum its inserts call
	// for, must not land in one window and not the other.
	if _, err := e.mon.Exec(ctx, monitorMark+"VACUUM (ANALYZE) skipq.topic_retained, skipq.topic_bodies"); err != nil {
		return nil, fmt.Errorf("vacuum the retained messages: %w", err)
	}
	e.checkpoint(ctx)
	e.logf("  written and vacuumed in %s", time.Since(filled).Round(time.Second))
	p := Point{Batch: 100, Pairs: 4}
	r := &FanoutReplay{Retained: retained}
	// One window unmeasured first: the first after the checkpoint writes a
	// full page image of every page it touches, and the first on fresh
	// tables runs faster than the ones after it (measured: 9,366 msgs/s,
	// then 6,031, 6,097, 6,133 with no replay at all), so measured first,
	// the window without a replay was not the one to compare with.
	if _, _, err := e.publishWindow(ctx, tu+"/messages", p); err != nil {
		return nil, err
	}
	var err error
	if r.PublishMsgsPerS, _, err = e.publishWindow(ctx, tu+"/messages", p); err != nil {
		return nil, err
	}
	replayer := topic + "-replayed"
	at := from.Add(-time.Second).UTC().Format(time.RFC3339Nano)
	if err := e.http.do(ctx, http.MethodPut, tu+"/subscriptions/"+url.PathEscape(replayer),
		[]byte(`{"replayFrom":"`+at+`"}`), http.StatusCreated, nil); err != nil {
		return nil, fmt.Errorf("subscribe %s with a replay: %w", replayer, err)
	}
	// The window starts once the replay has sent its first copies (the
	// worker's job runs every 5 s).
	copies := func() (copied int64, replaying bool, err error) {
		err = e.mon.QueryRow(ctx, monitorMark+`
SELECT (SELECT count(*) FROM skipq.messages m JOIN skipq.queues q ON q.id = m.queue_id WHERE q.name = $1),
       EXISTS (SELECT 1 FROM skipq.topic_replays r JOIN skipq.queues q ON q.id = r.queue_id WHERE q.name = $1)`,
			replayer).Scan(&copied, &replaying)
		return copied, replaying, err
	}
	var before int64
	for deadline := time.Now().Add(10 * time.Second); before == 0; {
		if before, _, err = copies(); err != nil {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the replay to %s did not start within 10 s", replayer)
		}
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
	started := time.Now()
	if r.DuringReplayMsgsPerS, _, err = e.publishWindow(ctx, tu+"/messages", p); err != nil {
		return nil, err
	}
	copied, replaying, err := copies()
	if err != nil {
		return nil, err
	}
	r.ReplayedMsgsPerS = round(float64(copied-before)/time.Since(started).Seconds(), 0)
	r.ReplayOutlastedWindow = replaying
	r.PublishMsgsPerS, r.DuringReplayMsgsPerS = round(r.PublishMsgsPerS, 0), round(r.DuringReplayMsgsPerS, 0)
	if r.PublishMsgsPerS > 0 {
		r.Ratio = round(r.DuringReplayMsgsPerS/r.PublishMsgsPerS, 3)
	}
	e.logf("  publishes %.0f msgs/s, %.0f during the replay (%.2f); the replay sent %.0f msgs/s (still going at the end: %t)",
		r.PublishMsgsPerS, r.DuringReplayMsgsPerS, r.Ratio, r.ReplayedMsgsPerS, r.ReplayOutlastedWindow)
	return r, nil
}

// FanoutReplay is publishing to a topic while a new subscription replays
// its retained messages, next to publishing without.
type FanoutReplay struct {
	Retained             int     `json:"retained"`
	PublishMsgsPerS      float64 `json:"publish_msgs_per_s"`
	DuringReplayMsgsPerS float64 `json:"publish_during_replay_msgs_per_s"`
	Ratio                float64 `json:"ratio"`
	// ReplayedMsgsPerS is how fast the replay sent the retained messages
	// meanwhile (warm-up and window).
	ReplayedMsgsPerS float64 `json:"replayed_msgs_per_s"`
	// ReplayOutlastedWindow says whether the replay still ran when the
	// window ended (else part of the window had none).
	ReplayOutlastedWindow bool `json:"replay_outlasted_window"`
}

func batchSuffix(batch int) string {
	if batch > 1 {
		return "/batch"
	}
	return ""
}

// fanoutRequest is a send's or a publish's body: one message, or a batch
// of n under "messages".
func fanoutRequest(n int) []byte {
	msg := `{"body":"` + fanoutBody + `"}`
	if n == 1 {
		return []byte(msg)
	}
	var b bytes.Buffer
	b.WriteString(`{"messages":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(msg)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// createTopic creates topic with n subscribed queues and returns them.
func (e *env) createTopic(ctx context.Context, base, topic string, n int) ([]string, error) {
	tu := base + "/v1/topics/" + url.PathEscape(topic)
	if err := e.http.do(ctx, http.MethodPut, tu, []byte(`{}`), http.StatusCreated, nil); err != nil {
		return nil, fmt.Errorf("create topic %s: %w", topic, err)
	}
	groups := make([]string, n)
	for i := range groups {
		groups[i] = fmt.Sprintf("%s-g%d", topic, i)
		if err := e.http.do(ctx, http.MethodPut, tu+"/subscriptions/"+url.PathEscape(groups[i]), nil,
			http.StatusCreated, nil); err != nil {
			return nil, fmt.Errorf("subscribe %s: %w", groups[i], err)
		}
	}
	return groups, nil
}

// publishWindow runs p.Pairs producers posting batches of p.Batch to u for
// the warm-up and one measured window, and returns messages per second in
// the window and how many were posted in all. Nothing consumes meanwhile.
func (e *env) publishWindow(ctx context.Context, u string, p Point) (float64, int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	body := fanoutRequest(p.Batch)
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range p.Pairs {
		wg.Go(func() {
			for ctx.Err() == nil {
				if err := e.http.do(ctx, http.MethodPost, u, body, http.StatusCreated, nil); err != nil {
					if ctx.Err() == nil {
						once.Do(func() { firstErr = err })
						cancel()
					}
					return
				}
				done.Add(int64(p.Batch))
			}
		})
	}
	rate := e.window(ctx, &done)
	cancel()
	wg.Wait()
	return rate, int(done.Load()), firstErr
}

// fillQueues sends count messages of fanoutBody to each queue, in batches
// of 100 from 4 senders.
func (e *env) fillQueues(ctx context.Context, base string, queues []string, count int) error {
	return e.fill(ctx, queues, count, func(q string, n int) string { return queuePath(base, q) + "/messages" + batchSuffix(n) })
}

// fill posts count messages of fanoutBody to each target, a batch of n to
// urlOf(target, n), in batches of 100 from 4 senders.
func (e *env) fill(ctx context.Context, targets []string, count int, urlOf func(target string, n int) string) error {
	type job struct {
		target string
		n      int
	}
	jobs := make(chan job)
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for j := range jobs {
				if err := e.http.do(ctx, http.MethodPost, urlOf(j.target, j.n),
					fanoutRequest(j.n), http.StatusCreated, nil); err != nil {
					errs <- fmt.Errorf("fill %s: %w", j.target, err)
					return
				}
			}
		})
	}
	var err error
feed:
	for sent := 0; sent < count; sent += 100 {
		for _, t := range targets {
			select {
			case jobs <- job{t, min(100, count-sent)}:
			case err = <-errs:
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	if err == nil && len(errs) > 0 {
		err = <-errs
	}
	return err
}

// window waits out the warm-up and returns the rate of counter over one
// measured window (0 when ctx ended first).
func (e *env) window(ctx context.Context, counter *atomic.Int64) float64 {
	return e.windowCPU(ctx, counter, nil)
}

// windowCPU is window, also adding what the window's counted messages
// cost in CPU time to cpu (nil: not measured).
func (e *env) windowCPU(ctx context.Context, counter *atomic.Int64, cpu *drainCPU) float64 {
	if !sleepCtx(ctx, e.o.Warmup) {
		return 0
	}
	var cpu0 cpuSnap
	var stmts0 map[int64]stmtStat
	if cpu != nil {
		cpu0, stmts0 = e.cpuSnapshot(ctx), e.statements(ctx, e.mon)
	}
	c0, t0 := counter.Load(), time.Now()
	if !sleepCtx(ctx, e.o.Duration) {
		return 0
	}
	n, secs := counter.Load()-c0, time.Since(t0).Seconds()
	if cpu != nil {
		cpu.add(cpu0, e.cpuSnapshot(ctx), n)
		cpu.addStatements(stmts0, e.statements(ctx, e.mon), secs)
	}
	return float64(n) / secs
}

// drainCPU sums the CPU time of a drain's measured windows, in clock
// ticks, by who spent it, the messages acked in them, and what each
// statement did in them (pg_stat_statements, when it answers).
type drainCPU struct {
	windows                int
	messages               int64
	postgres, nodes, bench int64
	postgresOK, nodesOK    bool
	stmts                  map[int64]stmtStat // summed deltas
	secs                   float64
}

// addStatements adds what each statement did between two snapshots.
func (d *drainCPU) addStatements(a, b map[int64]stmtStat, secs float64) {
	if a == nil || b == nil {
		return
	}
	if d.stmts == nil {
		d.stmts = map[int64]stmtStat{}
	}
	d.secs += secs
	for id, s := range b {
		t := d.stmts[id].plus(s.plus(a[id], -1), 1)
		t.label = s.label
		d.stmts[id] = t
	}
}

// statements are the drain's top statements by execution time.
func (d drainCPU) statements() []Statement {
	out, _ := diffStatements(map[int64]stmtStat{}, d.stmts, d.secs, 6)
	return out
}

// add is one window: the snapshots around it and the messages it acked.
func (d *drainCPU) add(from, to cpuSnap, messages int64) {
	if !from.ok || !to.ok {
		return
	}
	first := d.windows == 0
	d.postgresOK = (first || d.postgresOK) && from.postgresOK && to.postgresOK
	d.nodesOK = (first || d.nodesOK) && from.nodesOK && to.nodesOK
	d.windows++
	d.messages += messages
	d.postgres += to.postgres - from.postgres
	d.nodes += to.nodes - from.nodes
	d.bench += to.self - from.self
}

// perMessage is the CPU time a message acked cost, nil when nothing was
// measured.
func (d drainCPU) perMessage() *DrainCPU {
	if d.messages == 0 {
		return nil
	}
	us := func(ticks int64) float64 {
		return round(float64(ticks)/clockTicks*1e6/float64(d.messages), 1)
	}
	out := &DrainCPU{BenchUS: us(d.bench)}
	if d.postgresOK {
		out.PostgresUS = us(d.postgres)
	}
	if d.nodesOK {
		out.NodesUS = us(d.nodes)
	}
	return out
}

// DrainCPU is the CPU time a message acked in a drain's measured windows
// cost, in microseconds, by who spent it: the database server's
// processes (those that exited within a window, such as an autovacuum
// worker, included), the nodes when they run as processes of their
// own, and the bench process (the consumers, and the nodes when they run
// in it). At /proc's 10 ms ticks, a window of 10,000 messages resolves
// 1 µs a message.
type DrainCPU struct {
	PostgresUS float64 `json:"postgres_us"`
	NodesUS    float64 `json:"nodes_us,omitempty"`
	BenchUS    float64 `json:"bench_us"`
}

// fanoutDrainRounds is how many windows of the groups' drain, each next to
// a window of the plain queues' drain, a ratio is the median of: one pair
// of 5 s windows judged by the machine's noise alone (a plain queue's
// drain varied 2 × between runs of one build).
const fanoutDrainRounds = 3

// fanoutDrains drains groups and plains (as many, each holding held
// messages) in turns, up to fanoutDrainRounds windows each, and sets fs's
// drain rates (medians, per queue) and ratio (the median of each round's).
// Each window starts from a checkpoint: what the setup or the window before
// left (the fill's million messages at batch 100, a window's dead rows)
// is vacuumed and written before it, so that no window pays for another's.
// The fill's vacuum and dirty pages landing in the first rounds' windows
// ran them at 0.59-0.76 where the later ones ran 0.86-1.14; and the
// node's vacuum, due once the dead rows of windows together crossed its
// threshold, landed in whichever window crossed it (6 s of a group
// window's 25 s of statements, in one run). Now a window's vacuum is due
// to its own dead rows only.
// Another round starts only while both sides hold at least twice what the
// last one took: a window that ran out of messages would measure the
// backlog, not the drain (the caller tops the groups up to what the
// rounds take, by an estimate).
func (e *env) fanoutDrains(ctx context.Context, base string, groups, plains []string, held, batch int, fs *FanoutSubs) error {
	var group, plain, ratios []float64
	var groupCPU, plainCPU drainCPU
	leftG, leftP := held*len(groups), held*len(plains)
	for range fanoutDrainRounds {
		e.checkpoint(ctx)
		g, ackedG, err := e.drainWindow(ctx, base, groups, batch, &groupCPU)
		if err != nil {
			return err
		}
		e.checkpoint(ctx)
		p, ackedP, err := e.drainWindow(ctx, base, plains, batch, &plainCPU)
		if err != nil {
			return err
		}
		group, plain = append(group, g/float64(len(groups))), append(plain, p/float64(len(plains)))
		if p > 0 {
			ratios = append(ratios, round(g/p, 3))
		}
		if leftG, leftP = leftG-ackedG, leftP-ackedP; ackedG*2 > leftG || ackedP*2 > leftP {
			break
		}
	}
	fs.DrainRatios = ratios
	fs.GroupDrainMsgsPerS, fs.PlainDrainMsgsPerS = round(median(group), 0), round(median(plain), 0)
	fs.GroupDrainCPU, fs.PlainDrainCPU = groupCPU.perMessage(), plainCPU.perMessage()
	if groupCPU.stmts != nil && plainCPU.stmts != nil {
		fs.GroupDrainStatements, fs.PlainDrainStatements = groupCPU.statements(), plainCPU.statements()
	}
	if len(ratios) > 0 {
		fs.DrainRatio = median(ratios)
	}
	return nil
}

// median of xs (not sorted in place).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return quantile(s, 0.5)
}

// drainWindow receives and acks from each queue with fanoutConsumers
// consumers of batch at once, and returns the messages acked per second
// over all of them in one measured window, and how many were acked in all
// (warm-up included).
func (e *env) drainWindow(ctx context.Context, base string, queues []string, batch int, cpu *drainCPU) (float64, int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for _, q := range queues {
		for range fanoutConsumers {
			r := newReceiver(e.http, base, q, batch, 0)
			wg.Go(func() {
				for ctx.Err() == nil {
					got, err := r.receive(ctx)
					if err == nil && len(got.Messages) > 0 {
						handles := make([]string, len(got.Messages))
						for i, m := range got.Messages {
							handles[i] = m.ReceiptHandle
						}
						var n int
						n, err = r.ack(ctx, handles)
						done.Add(int64(n))
					}
					if err != nil {
						if ctx.Err() == nil {
							once.Do(func() { firstErr = err })
							cancel()
						}
						return
					}
				}
			})
		}
	}
	rate := e.windowCPU(ctx, &done, cpu)
	cancel()
	wg.Wait()
	return rate, int(done.Load()), firstErr
}

// relationBytes is the size of every table and index of the skipq schema
// in the database mon watches.
func relationBytes(ctx context.Context, mon *pgxpool.Pool) (int64, error) {
	var n int64
	err := mon.QueryRow(ctx, monitorMark+`SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c
JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = 'skipq' AND c.relkind = 'r'`).Scan(&n)
	return n, err
}

// fanoutStorage sets res's storage figures: the bytes per message published
// to 10 subscriptions, per message sent to one queue, and their ratio:
// fanoutStorageN of each, in
// batches of 100, measured as the growth of the schema's tables and
// indexes before anything consumes them. It measures in a database of its
// own, fresh from the migrations, with a node of its own on it: in the
// run's database the deletes of the scenarios before leave free space that
// these inserts reuse, and the growth stops being the bytes written (a
// full run measured 74 bytes a sent message of 1 KiB there). With --url
// (nodes the bench did not start) it can only measure in the run's
// database, and says so in the note.
func (e *env) fanoutStorage(ctx context.Context, base string, res *FanoutResult) error {
	mon, where := e.mon, "the run's database, whose free space inserts may reuse"
	if len(e.o.URLs) == 0 {
		scratch, err := e.newScratchDatabase(ctx, "storage")
		if err != nil {
			return fmt.Errorf("storage: %w", err)
		}
		defer scratch.drop(ctx, e)
		if err := migrations.Up(ctx, scratch.url); err != nil {
			return fmt.Errorf("storage: %w", err)
		}
		ns, err := e.startNodes(ctx, func(c *node.Config) { c.DatabaseURL = scratch.url })
		if err != nil {
			return fmt.Errorf("storage: %w", err)
		}
		defer ns.stop()
		base, mon, where = ns.at(0), scratch.mon, "a fresh database"
	}
	measure := func(u string) (float64, error) {
		e.checkpoint(ctx)
		before, err := relationBytes(ctx, mon)
		if err != nil {
			return 0, err
		}
		body := fanoutRequest(100)
		for range fanoutStorageN / 100 {
			if err := e.http.do(ctx, http.MethodPost, u, body, http.StatusCreated, nil); err != nil {
				return 0, err
			}
		}
		after, err := relationBytes(ctx, mon)
		return float64(after-before) / fanoutStorageN, err
	}
	plain := queueName("fanout-storage-plain")
	if err := e.http.createQueue(ctx, base, plain, ""); err != nil {
		return err
	}
	perSend, err := measure(queuePath(base, plain) + "/messages/batch")
	if err != nil {
		return fmt.Errorf("storage of sends: %w", err)
	}
	topic := queueName("fanout-storage")
	if _, err := e.createTopic(ctx, base, topic, 10); err != nil {
		return err
	}
	perPublish, err := measure(base + "/v1/topics/" + url.PathEscape(topic) + "/messages")
	if err != nil {
		return fmt.Errorf("storage of publishes: %w", err)
	}
	res.StorageSendBytes, res.StoragePublishBytes = round(perSend, 0), round(perPublish, 0)
	res.StorageNote = fmt.Sprintf("%.0f bytes a message sent to one queue, %.0f a message published to 10 subscriptions (%d of each, 1 KiB bodies, tables and indexes before consumption, in %s)",
		perSend, perPublish, fanoutStorageN, where)
	e.logf("fanout: %s", res.StorageNote)
	res.StorageRatio = round(perPublish/perSend, 3)
	return nil
}

// fanoutWake is the p50, in ms, of a publish's answer to the answer of a
// receive waiting on each of 10 subscribed queues, over fanoutWakeSamples
// publishes after the run's warm-up of them (as every measured run has
// one): the first publishes and claims after the drains plan their
// statements on the pool's connections and write the first changes of
// pages after the checkpoint in full; a run traced them at 2 to 3 times
// the latency of those that followed.
func (e *env) fanoutWake(ctx context.Context, base string) (float64, error) {
	topic := queueName("fanout-wake")
	groups, err := e.createTopic(ctx, base, topic, 10)
	if err != nil {
		return 0, err
	}
	pu := base + "/v1/topics/" + url.PathEscape(topic) + "/messages"
	sample := func() ([]float64, error) {
		arrived := make(chan time.Time, len(groups))
		var wg sync.WaitGroup
		for _, g := range groups {
			r := newReceiver(e.http, base, g, 1, 5)
			wg.Go(func() {
				got, err := r.receive(ctx)
				if err == nil && len(got.Messages) == 1 {
					arrived <- time.Now()
					_, _ = r.ack(ctx, []string{got.Messages[0].ReceiptHandle})
				}
			})
		}
		if err := e.waitForWaiters(ctx, []string{base}, len(groups), 5*time.Second); err != nil {
			return nil, err
		}
		if err := e.http.do(ctx, http.MethodPost, pu, fanoutRequest(1), http.StatusCreated, nil); err != nil {
			return nil, err
		}
		published := time.Now()
		wg.Wait()
		close(arrived)
		var lat []float64
		for at := range arrived {
			lat = append(lat, float64(at.Sub(published).Microseconds())/1000)
		}
		return lat, nil
	}
	for warm := time.Now().Add(e.o.Warmup); time.Now().Before(warm); {
		if _, err := sample(); err != nil {
			return 0, err
		}
	}
	var lat []float64
	for range fanoutWakeSamples {
		l, err := sample()
		if err != nil {
			return 0, err
		}
		lat = append(lat, l...)
	}
	if len(lat) == 0 {
		return 0, fmt.Errorf("no waiting receiver got a published message")
	}
	slices.Sort(lat)
	p50 := round(quantile(lat, 0.5), 3)
	e.logf("fanout: a publish to 10 subscriptions wakes their receivers, p50 %.2f ms (%d samples, after %.1f s of them unmeasured)",
		p50, len(lat), e.o.Warmup.Seconds())
	return p50, nil
}

// FanoutResult is the fanout scenario: the topics contract's ratios, and
// the points they come from.
type FanoutResult struct {
	PublishRatioB1x16   float64       `json:"publish_ratio_b1x16"`
	PublishRatioB100x4  float64       `json:"publish_ratio_b100x4"`
	DrainRatioMin       float64       `json:"drain_ratio_min"`
	StorageRatio        float64       `json:"storage_ratio"`
	StorageNote         string        `json:"storage_note"`
	StorageSendBytes    float64       `json:"storage_bytes_per_send"`    // a message sent to one queue
	StoragePublishBytes float64       `json:"storage_bytes_per_publish"` // a message published to 10 subscriptions
	WakeP50MS           float64       `json:"wake_p50_ms"`
	Replay              *FanoutReplay `json:"replay"`
	Points              []FanoutPoint `json:"points"`
}

// FanoutPoint is one batch × publishers point: sends to one queue and its
// drain, then each subscription count.
type FanoutPoint struct {
	Batch              int          `json:"batch"`
	Publishers         int          `json:"publishers"`
	SendMsgsPerS       float64      `json:"send_msgs_per_s"`
	PlainDrainMsgsPerS float64      `json:"plain_drain_msgs_per_s"`
	Subs               []FanoutSubs `json:"subscriptions"`
}

// FanoutSubs is one subscription count of a point: messages published per
// second, and how fast each group drained with fanoutConsumers consumers
// (all groups at once) next to as many plain queues drained the same way.
type FanoutSubs struct {
	Subscriptions      int     `json:"subscriptions"`
	PublishMsgsPerS    float64 `json:"publish_msgs_per_s"`
	PublishRatio       float64 `json:"publish_ratio"`
	GroupDrainMsgsPerS float64 `json:"group_drain_msgs_per_s"`
	// PlainDrainMsgsPerS is each of as many plain queues drained at once.
	PlainDrainMsgsPerS float64 `json:"plain_drain_msgs_per_s"`
	// DrainRatio is the median of DrainRatios, each round's groups'
	// drain over the plain queues' right after it.
	DrainRatio  float64   `json:"drain_ratio"`
	DrainRatios []float64 `json:"drain_ratios"`
	// GroupDrainCPU and PlainDrainCPU are what a message acked cost each
	// side in CPU time, over all the rounds' windows: where the groups'
	// drain spends what the plain queues' does not.
	GroupDrainCPU *DrainCPU `json:"group_drain_cpu,omitempty"`
	PlainDrainCPU *DrainCPU `json:"plain_drain_cpu,omitempty"`
	// GroupDrainStatements and PlainDrainStatements are each side's top
	// statements in those windows (pg_stat_statements).
	GroupDrainStatements []Statement `json:"group_drain_statements,omitempty"`
	PlainDrainStatements []Statement `json:"plain_drain_statements,omitempty"`
}

func writeFanout(w io.Writer, f *FanoutResult) {
	fmt.Fprintf(w, "fanout: topics, 1 KiB bodies, %d consumers per group (and on the plain queue)\n", fanoutConsumers)
	fmt.Fprintf(w, "  (drain/s: one plain queue drained alone; plain/s: each of as many plain queues as groups, drained at once;\n")
	fmt.Fprintf(w, "  group/s and plain/s in %d windows each, in turns: medians, and the median of the rounds' ratios)\n", fanoutDrainRounds)
	fmt.Fprintf(w, "  %5s %5s  %10s %10s  %4s %10s %7s %10s %10s %7s\n", "batch", "pubs", "send/s", "drain/s", "subs", "publish/s", "ratio", "group/s", "plain/s", "ratio")
	for _, p := range f.Points {
		for _, s := range p.Subs {
			fmt.Fprintf(w, "  %5d %5d  %10.0f %10.0f  %4d %10.0f %7.2f %10.0f %10.0f %7.2f\n", p.Batch, p.Publishers,
				p.SendMsgsPerS, p.PlainDrainMsgsPerS, s.Subscriptions, s.PublishMsgsPerS, s.PublishRatio,
				s.GroupDrainMsgsPerS, s.PlainDrainMsgsPerS, s.DrainRatio)
		}
	}
	fmt.Fprintf(w, "  CPU time a message acked in the drains, µs, groups / plain queues (postgres, nodes, bench process):\n")
	for _, p := range f.Points {
		for _, s := range p.Subs {
			if g, pl := s.GroupDrainCPU, s.PlainDrainCPU; g != nil && pl != nil {
				fmt.Fprintf(w, "  %5d %5d  %4d subs  postgres %.0f / %.0f  nodes %.0f / %.0f  bench %.0f / %.0f\n", p.Batch, p.Publishers,
					s.Subscriptions, g.PostgresUS, pl.PostgresUS, g.NodesUS, pl.NodesUS, g.BenchUS, pl.BenchUS)
			}
		}
	}
	fmt.Fprintf(w, "  storage: %s; ratio %.2f\n  wake p50 with 10 subscriptions: %.2f ms\n", f.StorageNote, f.StorageRatio, f.WakeP50MS)
	if r := f.Replay; r != nil {
		fmt.Fprintf(w, "  replay of %d retained messages: publishes %.0f msgs/s, %.0f during it (%.2f); it sent %.0f msgs/s (outlasted the window: %t)\n",
			r.Retained, r.PublishMsgsPerS, r.DuringReplayMsgsPerS, r.Ratio, r.ReplayedMsgsPerS, r.ReplayOutlastedWindow)
	}
}
