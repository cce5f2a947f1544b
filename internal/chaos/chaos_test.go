//go:build chaos || failover

// Package chaos proves docs/RELIABILITY.md under faults: three `skipq serve` processes
// on a private PostgreSQL, producers and consumers over HTTP, and a fault
// loop that SIGKILLs nodes, crashes PostgreSQL twice (an immediate
// shutdown, then a kill -9 of every PostgreSQL process; each restart
// replays the WAL) and terminates every backend. Consumers ack, nack,
// release and requeue; some sends are delayed and some messages end in the
// dead-letter queue. The verdict (ledger_test.go) checks the consumers'
// records against an audit trigger in the test's database. Run it with
// `make chaos`; docs/RELIABILITY.md describes the verdict.
package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skipq/skipq/internal/devpg"
	"github.com/skipq/skipq/internal/testport"
)

const (
	total        = 100_000
	batchSize    = 100
	producers    = 4
	consumers    = 6
	leaseSeconds = 5
	queue        = "chaos"
	// Messages the consumers requeue go to requeueQueue; messages nacked or
	// leased maxReceives times in either goes to deadLetterQueue, where
	// they are acked.
	requeueQueue    = "chaos.requeued"
	deadLetterQueue = "chaos.dlq"
	maxReceives     = 3
	deadline        = 8 * time.Minute
	// hangBound is how long a request may take before it counts as a hang
	// (docs/API.md: 503, never a hang). Generous: a long-poll waits at most 1 s
	// and every route has a 30 s server-side deadline.
	hangBound = 35 * time.Second
)

func TestChaos(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	root, _ := filepath.Abs("../..") // the repository
	binary := buildSkipq(t)
	dir := filepath.Join(root, ".skipq", "chaos")
	os.RemoveAll(dir)
	pg, err := devpg.Start(ctx, devpg.Options{Dir: dir, Port: 54331})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { pg.Stop() }()
	if err := pg.CreateDatabase(ctx, "skipq"); err != nil {
		t.Fatal(err)
	}
	dbURL := pg.URL("skipq")

	nodes := make([]*node, 3)
	for i := range nodes {
		nodes[i] = &node{binary: binary, dbURL: dbURL, port: freePort(t), logDir: dir}
		nodes[i].start(t)
	}
	defer func() {
		for _, n := range nodes {
			n.kill()
		}
	}()
	// The client's timeout is only a backstop: a request that takes longer
	// than hangBound counts as a hang, answered or not.
	c := &cluster{nodes: nodes, http: &http.Client{Timeout: hangBound + 15*time.Second}}
	c.waitReady(ctx, t)

	c.createQueues(ctx, t)
	if err := installAudit(ctx, dbURL); err != nil {
		t.Fatalf("audit: %v", err)
	}

	var sent sync.Map // id -> true
	drained := make(chan struct{})
	var sentN atomic.Int64
	book := newLedger()

	var work sync.WaitGroup
	ids := make(chan []string, producers)
	go func() {
		for i := 0; i < total; i += batchSize {
			batch := make([]string, 0, batchSize)
			for j := i; j < min(i+batchSize, total); j++ {
				batch = append(batch, fmt.Sprintf("m-%06d", j))
			}
			ids <- batch
		}
		close(ids)
	}()
	for range producers {
		work.Go(func() {
			for batch := range ids {
				msgs := make([]map[string]any, len(batch))
				for i, id := range batch {
					msgs[i] = map[string]any{"body": id, "messageId": id}
					if delayed(id) {
						msgs[i]["delaySeconds"] = 1 + rand.IntN(3)
					}
				}
				// Retry with the same ids until a node answers 201: the
				// idempotency keys make a retry of a committed batch a no-op.
				for ctx.Err() == nil {
					if status, _ := c.post(ctx, "/v1/queues/"+queue+"/messages/batch", map[string]any{"messages": msgs}); status == http.StatusCreated {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				for _, id := range batch {
					sent.Store(id, true)
				}
				sentN.Add(int64(len(batch)))
			}
		})
	}
	// Consumers settle what they receive: in the main queue mostly acks,
	// and a share of nacks, releases (visibility 0) and requeues; poison
	// messages are nacked every time, so they reach the dead-letter queue.
	// The last consumer serves the requeue and dead-letter queues.
	for i := range consumers {
		queues := []string{queue}
		if i == consumers-1 {
			queues = []string{requeueQueue, deadLetterQueue}
		}
		work.Go(func() {
			for n := 0; ctx.Err() == nil && !closed(drained); n++ {
				q := queues[n%len(queues)]
				crashes, sentAt := book.crashCount(), time.Now()
				status, body := c.post(ctx, "/v1/queues/"+q+"/messages/receive",
					map[string]any{"maxMessages": 50, "waitSeconds": 1, "visibilitySeconds": leaseSeconds})
				if status != http.StatusOK {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				var got struct {
					Messages []received `json:"messages"`
				}
				if json.Unmarshal(body, &got) != nil {
					continue
				}
				by := map[string][]*delivery{}
				for _, d := range book.received(q, crashes, sentAt, got.Messages) {
					a := chooseAction(q, d.id)
					by[a] = append(by[a], d)
				}
				book.settle(ctx, c, "/v1/receipts/ack", "ack", by["ack"], nil)
				book.settle(ctx, c, "/v1/receipts/nack", "nack", by["nack"], nil)
				book.settle(ctx, c, "/v1/receipts/visibility", "release", by["release"], map[string]any{"visibilitySeconds": 0})
				book.settle(ctx, c, "/v1/receipts/requeue", "requeue", by["requeue"], map[string]any{"queue": requeueQueue})
			}
		})
	}

	// The fault loop: a node kill every few seconds, one PostgreSQL
	// restart, one termination of every backend.
	var kills, pgRestarts, terminations int
	faults := time.NewTicker(3 * time.Second)
	defer faults.Stop()
	progress := time.NewTicker(10 * time.Second)
	defer progress.Stop()
	for step := 0; !closed(drained) && ctx.Err() == nil; {
		select {
		case <-progress.C:
			book.mu.Lock()
			t.Logf("sent=%d redeliveries=%d", sentN.Load(), book.redeliveries)
			book.mu.Unlock()
			// Done when everything was sent, every fault injected and the
			// queue is empty in the database.
			if sentN.Load() == total && step >= 9 && queueEmpty(ctx, dbURL) {
				close(drained)
			}
			continue
		case <-faults.C:
		case <-ctx.Done():
			continue
		}
		step++
		switch {
		case step == 4 || step == 9:
			// Crashes, not clean shutdowns: an immediate shutdown (no
			// checkpoint), then a kill -9 of the postmaster and every
			// backend; each restart replays the WAL.
			sig, how := syscall.SIGQUIT, "immediate shutdown"
			if step == 9 {
				sig, how = syscall.SIGKILL, "kill -9 of every PostgreSQL process"
			}
			t.Logf("fault: crashing PostgreSQL (%s)", how)
			book.crashBegins()
			if err := pg.Crash(sig); err != nil {
				t.Fatal(err)
			}
			book.crashOver()
			pg = restartPG(ctx, t, dir)
			pgRestarts++
		case step == 7:
			t.Log("fault: pg_terminate_backend on every skipq connection")
			terminateAll(ctx, t, dbURL)
			terminations++
		default:
			n := nodes[rand.IntN(len(nodes))]
			t.Logf("fault: SIGKILL node :%d", n.port)
			n.kill()
			n.start(t)
			kills++
		}
	}
	work.Wait()

	// Verdict, from the consumers' records and the database's audit.
	v, _, conn := auditVerdict(t, dbURL, &sent, book)
	ackedThenRedelivered := ackedThenRedelivered(book)
	var left, multiQueue int64
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM skipq.messages").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(context.Background(),
		"SELECT count(*) FROM (SELECT message_id FROM skipq.messages GROUP BY message_id HAVING count(*) > 1) d").Scan(&multiQueue); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("chaos: sent=%d acked=%d lost=%d double_acked=%d acked_then_redelivered=%d redeliveries=%d crash_redeliveries=%d node_kills=%d pg_restarts=%d backend_terminations=%d acks_answer_lost=%d left_in_queue=%d"+
		" server_errors=%d hangs=%d audit_mismatch=%d early_redeliveries=%d early_delayed=%d over_delivered=%d"+
		" nacks=%d releases=%d requeues=%d dead_lettered=%d delayed=%d\n",
		sentN.Load(), v.acked, v.lost, v.doubleAcked, ackedThenRedelivered, book.redeliveries, book.crashRedeliveries, kills, pgRestarts, terminations, v.acksAnswerLost, left,
		c.serverErrors.Load(), c.hangs.Load(), v.auditMismatch, v.earlyRedeliveries, v.earlyDelayed, v.overDelivered,
		v.nacked, v.released, v.requeued, v.deadLettered, v.delayed)
	for _, s := range c.samples {
		t.Log("failure:", s)
	}
	for _, s := range v.samples {
		t.Log("verdict:", s)
	}
	for _, s := range book.repeats {
		t.Log("repeat:", s)
	}
	switch {
	case sentN.Load() != total:
		t.Fatalf("only %d of %d sends were confirmed", sentN.Load(), total)
	case v.lost > 0:
		t.Fatalf("%d messages lost (no ack in the audit), e.g. %v", v.lost, v.lostSample)
	case book.repeated > 0:
		t.Fatalf("%d deliveries repeated a receiveCount (not explained by a crash of PostgreSQL)", book.repeated)
	case v.earlyDelayed > 0:
		t.Fatalf("%d messages were delivered before their delay ended (see the log)", v.earlyDelayed)
	case v.overDelivered > 0:
		t.Fatalf("%d deliveries went past maxReceiveCount (see the log)", v.overDelivered)
	case v.earlyRedeliveries > 0:
		t.Fatalf("%d deliveries came while the previous delivery's lease was live (see the log)", v.earlyRedeliveries)
	case v.doubleAcked > 0:
		t.Fatalf("%d messages acked twice", v.doubleAcked)
	case ackedThenRedelivered > 0:
		t.Fatalf("%d deliveries came after a 200 ack of their message", ackedThenRedelivered)
	case v.auditMismatch > 0:
		t.Fatalf("%d settles disagree with the audit (see the log)", v.auditMismatch)
	case left != 0:
		t.Fatalf("%d messages still in the database", left)
	case multiQueue != 0:
		t.Fatalf("%d message ids in more than one row", multiQueue)
	case c.serverErrors.Load() > 0:
		t.Fatalf("%d answers were server errors (5xx other than 503, or 503 without Retry-After); the nodes' logs are %s/node-*.log", c.serverErrors.Load(), dir)
	case c.hangs.Load() > 0:
		t.Fatalf("%d requests hung (no answer within %v)", c.hangs.Load(), hangBound)
	case v.nacked == 0 || v.released == 0 || v.requeued == 0 || v.deadLettered == 0 || v.delayed == 0:
		t.Fatalf("the workload missed a path (nacks %d, releases %d, requeues %d, dead-lettered %d, delayed %d)",
			v.nacked, v.released, v.requeued, v.deadLettered, v.delayed)
	case pgRestarts != 2 || terminations != 1:
		t.Fatalf("the run ended before every fault was injected (pg restarts %d, terminations %d)", pgRestarts, terminations)
	}
}

// buildSkipq builds this tree's skipq binary into the test's temp dir.
func buildSkipq(t *testing.T) string {
	binary := filepath.Join(t.TempDir(), "skipq")
	if out, err := exec.Command("go", "build", "-o", binary, "../../cmd/skipq").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return binary
}

// node is one `skipq serve` process.
type node struct {
	binary, dbURL string
	port          int
	logDir        string // each run of the node appends its log to node-<port>.log here
	mu            sync.Mutex
	cmd           *exec.Cmd
}

func (n *node) start(t *testing.T) {
	cmd := exec.Command(n.binary, "serve")
	cmd.Env = append(os.Environ(), "SKIPQ_DATABASE_URL="+n.dbURL, fmt.Sprintf("SKIPQ_LISTEN_ADDR=127.0.0.1:%d", n.port), "SKIPQ_AUTH=off")
	logFile, err := os.OpenFile(filepath.Join(n.logDir, fmt.Sprintf("node-%d.log", n.port)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the child keeps its own descriptor
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.cmd = cmd
	n.mu.Unlock()
}

func (n *node) kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		n.cmd.Process.Signal(syscall.SIGKILL)
		n.cmd.Wait()
		n.cmd = nil
	}
}

// cluster sends each request to a random node; callers retry on failure.
// It counts the answers that are failures whatever the fault: a 5xx other
// than 503, a 503 without Retry-After, and requests that hang.
type cluster struct {
	nodes []*node
	http  *http.Client

	serverErrors, hangs atomic.Int64
	// unavailable counts the 503s with Retry-After (what an outage
	// should answer), and slowest503 is the longest one took, in ms.
	unavailable, slowest503 atomic.Int64
	mu                      sync.Mutex
	samples                 []string // the first few failures, for the log
}

func (c *cluster) failure(counter *atomic.Int64, format string, args ...any) {
	counter.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.samples) < 10 {
		c.samples = append(c.samples, fmt.Sprintf(format, args...))
	}
}

func (c *cluster) post(ctx context.Context, path string, body any) (int, []byte) {
	return c.do(ctx, "POST", path, body)
}

func (c *cluster) do(ctx context.Context, method, path string, body any) (int, []byte) {
	return c.doOn(ctx, c.nodes[rand.IntN(len(c.nodes))], method, path, body)
}

// doOn sends one request to node n.
func (c *cluster) doOn(ctx context.Context, n *node, method, path string, body any) (int, []byte) {
	raw, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, method, fmt.Sprintf("http://127.0.0.1:%d%s", n.port, path), bytes.NewReader(raw))
	if err != nil {
		return 0, nil
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		// A killed node or database resets or refuses connections: retried.
		// A request still unanswered after the bound is a hang.
		if took := time.Since(start); took > hangBound && ctx.Err() == nil {
			c.failure(&c.hangs, "%s %s to :%d: no answer after %v: %v", method, path, n.port, took.Round(time.Second), err)
		}
		return 0, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	took := time.Since(start)
	switch {
	case took > hangBound:
		c.failure(&c.hangs, "%s %s to :%d: answered %d after %v", method, path, n.port, resp.StatusCode, took.Round(time.Second))
	case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "":
		c.failure(&c.serverErrors, "%s %s to :%d: 503 without Retry-After: %s", method, path, n.port, b)
	case resp.StatusCode == http.StatusServiceUnavailable:
		c.unavailable.Add(1)
		for ms := took.Milliseconds(); ; {
			if old := c.slowest503.Load(); ms <= old || c.slowest503.CompareAndSwap(old, ms) {
				break
			}
		}
	case resp.StatusCode >= 500 && resp.StatusCode != http.StatusServiceUnavailable:
		c.failure(&c.serverErrors, "%s %s to :%d: %d: %s", method, path, n.port, resp.StatusCode, b)
	}
	if err != nil {
		return 0, nil // the answer was cut off: its outcome is unknown
	}
	return resp.StatusCode, b
}

// createQueues makes the workload's queues.
func (c *cluster) createQueues(ctx context.Context, t *testing.T) {
	for _, q := range []struct {
		name     string
		settings map[string]any
	}{
		// The dead-letter queue's messages are only ever acked; its own
		// limit is the largest, so lease expiries alone never discard one.
		{deadLetterQueue, map[string]any{"maxReceiveCount": 1024}},
		{queue, map[string]any{"maxReceiveCount": maxReceives, "deadLetterQueue": deadLetterQueue}},
		{requeueQueue, map[string]any{"maxReceiveCount": maxReceives, "deadLetterQueue": deadLetterQueue}},
	} {
		for st := 0; st != http.StatusCreated && st != http.StatusOK; {
			if ctx.Err() != nil {
				t.Fatalf("creating queue %s: %v", q.name, ctx.Err())
			}
			st, _ = c.do(ctx, "PUT", "/v1/queues/"+q.name, q.settings)
		}
	}
}

func (c *cluster) waitReady(ctx context.Context, t *testing.T) {
	for _, n := range c.nodes {
		for {
			resp, err := c.http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", n.port))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if ctx.Err() != nil {
				t.Fatal("nodes never became ready")
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// restartPG starts the crashed cluster again. After a kill -9 the
// postmaster's backends may still be exiting when it has: until the last
// one has, a new postmaster refuses the data directory ("pre-existing shared
// memory block is still in use"), so the start is retried for a while.
func restartPG(ctx context.Context, t *testing.T, dir string) *devpg.Cluster {
	for attempt := 1; ; attempt++ {
		pg, err := devpg.Start(ctx, devpg.Options{Dir: dir, Port: 54331})
		if err == nil {
			return pg
		}
		if attempt == 40 || ctx.Err() != nil {
			t.Fatal(err)
		}
		t.Logf("restart attempt %d: %v", attempt, err)
		time.Sleep(250 * time.Millisecond)
	}
}

// poison ids are nacked at every delivery: they reach the dead-letter queue.
func poison(id string) bool { return idNumber(id)%100 == 7 }

// delayed ids are sent with a delay of 1 to 3 s.
func delayed(id string) bool { return idNumber(id)%50 == 3 }

func idNumber(id string) int {
	var n int
	fmt.Sscanf(id, "m-%d", &n)
	return n
}

// chooseAction picks how a consumer settles a delivery.
func chooseAction(q, id string) string {
	r := rand.Float64()
	switch {
	case q == deadLetterQueue:
		return "ack"
	case poison(id):
		return "nack"
	case r < 0.04:
		return "nack"
	case q == requeueQueue:
		return "ack"
	case r < 0.06:
		return "release"
	case r < 0.08:
		return "requeue"
	}
	return "ack"
}

func terminateAll(ctx context.Context, t *testing.T, dbURL string) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Logf("terminate: %v", err)
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"); err != nil {
		t.Logf("terminate: %v", err)
	}
}

// freePort is a loopback port in the chaos test's range (the failover
// test's fixed ports are in 22000-22999) that nothing listens on now.
func freePort(t *testing.T) int { return testport.Free(t, 24000) }

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func queueEmpty(ctx context.Context, dbURL string) bool {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return false
	}
	defer conn.Close(context.Background())
	var n int64
	return conn.QueryRow(ctx, "SELECT count(*) FROM skipq.messages").Scan(&n) == nil && n == 0
}
