package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// probe watches one measured window: where the machine's CPU went, what the
// database's backends waited on, which statements took the database's time,
// and how many commits, fsyncs and WAL bytes the window cost.
type probe struct {
	e        *env
	mon      *pgxpool.Pool // on the watched database
	start    time.Time
	cpu0     cpuSnap
	self0    time.Duration // selfCPU at the start
	db0      dbCounters
	stmts0   map[int64]stmtStat
	tables0  map[string]TableWrites
	waits    map[string]int
	samples  int
	stopWait func()
}

// startProbe begins a window of the database mon is on. Its CPU split,
// WAL and fsyncs are the server's whatever the database.
func (e *env) startProbe(ctx context.Context, mon *pgxpool.Pool) *probe {
	p := &probe{e: e, mon: mon, start: time.Now(), waits: map[string]int{}}
	p.cpu0 = e.cpuSnapshot(ctx)
	p.self0 = selfCPU()
	p.db0 = readDBCounters(ctx, mon)
	p.stmts0 = e.statements(ctx, mon)
	p.tables0 = tableWrites(ctx, mon)
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wg.Go(func() {
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			w, ok := waitSample(wctx, mon)
			if !ok {
				continue
			}
			mu.Lock()
			p.samples++
			for k, v := range w {
				p.waits[k] += v
			}
			mu.Unlock()
		}
	})
	p.stopWait = func() { cancel(); wg.Wait() }
	return p
}

// stop ends the window and summarizes it.
func (p *probe) stop(ctx context.Context) *RunStats {
	p.stopWait()
	e := p.e
	secs := time.Since(p.start).Seconds()
	rs := &RunStats{Seconds: round(secs, 2)}
	self1 := selfCPU()
	cpu1 := e.cpuSnapshot(ctx)
	rs.CPU = p.cpu0.share(cpu1)
	e.noteCPU(rs.CPU)
	rs.selfCPU = self1 - p.self0
	if p.cpu0.postgresOK && cpu1.postgresOK {
		rs.postgresCPU = time.Duration(cpu1.postgres-p.cpu0.postgres) * time.Second / clockTicks
	}
	if p.cpu0.nodesOK && cpu1.nodesOK {
		rs.nodesCPU = time.Duration(cpu1.nodes-p.cpu0.nodes) * time.Second / clockTicks
	}
	db1 := readDBCounters(ctx, p.mon)
	if p.db0.ok && db1.ok {
		rs.commits = db1.commits - p.db0.commits
		rs.CommitsPerS = round(float64(rs.commits)/secs, 0)
	}
	if p.db0.walOK && db1.walOK {
		rs.fsyncs, rs.walBytes = db1.walSync-p.db0.walSync, db1.walBytes-p.db0.walBytes
		rs.FsyncsPerS = round(float64(rs.fsyncs)/secs, 0)
		rs.WALMBPerS = round(float64(rs.walBytes)/secs/1e6, 1)
	}
	if p.db0.tableOK && db1.tableOK {
		rs.Vacuums = db1.vacuums - p.db0.vacuums
		rs.DeadTuples = db1.deadTups
	}
	total := 0
	for _, v := range p.waits {
		total += v
	}
	if p.samples > 0 {
		rs.ActiveBackends = round(float64(total)/float64(p.samples), 2)
	}
	for k, v := range p.waits {
		rs.Waits = append(rs.Waits, Share{Name: k, Percent: round(100*float64(v)/float64(max(total, 1)), 1)})
	}
	slices.SortFunc(rs.Waits, func(a, b Share) int { return cmp.Compare(b.Percent, a.Percent) })
	if len(rs.Waits) > 8 {
		rs.Waits = rs.Waits[:8]
	}
	rs.Statements, rs.StatementsPerS = diffStatements(p.stmts0, e.statements(ctx, p.mon), secs, 6)
	rs.tables = diffTableWrites(p.tables0, tableWrites(ctx, p.mon))
	return rs
}

// waitSample counts the busy backends of mon's database by what they wait
// on ("CPU" when they wait on nothing: running or runnable). The monitor's
// own backends are left out.
func waitSample(ctx context.Context, mon *pgxpool.Pool) (map[string]int, bool) {
	rows, err := mon.Query(ctx, monitorMark+`
SELECT coalesce(wait_event_type || ':' || wait_event,
                CASE WHEN state = 'active' THEN 'CPU' ELSE state END), count(*)::int
FROM pg_stat_activity
WHERE datname = current_database() AND backend_type = 'client backend'
  AND pid <> pg_backend_pid() AND application_name <> $1 AND state <> 'idle'
GROUP BY 1`, monitorApp)
	if err != nil {
		return nil, false
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if rows.Scan(&k, &n) == nil {
			out[k] = n
		}
	}
	return out, rows.Err() == nil
}

// dbCounters are cumulative counters of a database and the server's WAL.
type dbCounters struct {
	ok, walOK, tableOK bool
	commits            int64
	walSync, walBytes  int64
	vacuums, deadTups  int64 // skipq.messages: (auto)vacuums so far, dead tuples now
}

// readDBCounters reads them for mon's database.
func readDBCounters(ctx context.Context, mon *pgxpool.Pool) dbCounters {
	var c dbCounters
	c.ok = mon.QueryRow(ctx, monitorMark+"SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").Scan(&c.commits) == nil
	c.walOK = mon.QueryRow(ctx, monitorMark+"SELECT wal_sync, wal_bytes::bigint FROM pg_stat_wal").Scan(&c.walSync, &c.walBytes) == nil
	c.tableOK = mon.QueryRow(ctx, monitorMark+`SELECT vacuum_count + autovacuum_count, n_dead_tup
FROM pg_stat_user_tables WHERE schemaname = 'skipq' AND relname = 'messages'`).Scan(&c.vacuums, &c.deadTups) == nil
	return c
}

// TableWrites are rows a table gained, changed and lost: cumulative in a
// snapshot, per acked message in RunStats.
type TableWrites struct {
	Inserted   float64 `json:"inserted"`
	Updated    float64 `json:"updated"`
	HOTUpdated float64 `json:"hot_updated"` // of Updated: wrote no index entry
	Deleted    float64 `json:"deleted"`
}

// tableWrites snapshots the row counters of the tables of skipq and of the
// baselines in mon's database (pg_stat_user_tables, which a backend updates
// when its transaction ends, at most once a second: a window's first and
// last second blur).
func tableWrites(ctx context.Context, mon *pgxpool.Pool) map[string]TableWrites {
	rows, err := mon.Query(ctx, monitorMark+`
SELECT schemaname || '.' || relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del
FROM pg_stat_user_tables WHERE schemaname IN ('skipq', 'skipq_bench', 'pgmq')`)
	if err != nil {
		return nil
	}
	defer rows.Close()
	out := map[string]TableWrites{}
	for rows.Next() {
		var name string
		var ins, upd, hot, del int64
		if rows.Scan(&name, &ins, &upd, &hot, &del) == nil {
			out[name] = TableWrites{float64(ins), float64(upd), float64(hot), float64(del)}
		}
	}
	if rows.Err() != nil {
		return nil
	}
	return out
}

// diffTableWrites is what each table's rows did between two snapshots,
// for the tables something was written to.
func diffTableWrites(a, b map[string]TableWrites) map[string]TableWrites {
	if a == nil || b == nil {
		return nil
	}
	out := map[string]TableWrites{}
	for name, t := range b {
		p := a[name]
		d := TableWrites{t.Inserted - p.Inserted, t.Updated - p.Updated, t.HOTUpdated - p.HOTUpdated, t.Deleted - p.Deleted}
		if d.Inserted+d.Updated+d.Deleted > 0 {
			out[name] = d
		}
	}
	return out
}

// stmtStat is one pg_stat_statements entry.
type stmtStat struct {
	label   string
	calls   int64
	totalMS float64
	rows    int64
	hit     int64
	read    int64
	walRecs int64
	walB    int64
}

// plus is s with d's counts added (sign -1: subtracted); the label stays s's.
func (s stmtStat) plus(d stmtStat, sign int64) stmtStat {
	s.calls += sign * d.calls
	s.totalMS += float64(sign) * d.totalMS
	s.rows += sign * d.rows
	s.hit += sign * d.hit
	s.read += sign * d.read
	s.walRecs += sign * d.walRecs
	s.walB += sign * d.walB
	return s
}

// statements snapshots pg_stat_statements for mon's database, without the
// monitor's own statements. nil when the extension is not there.
func (e *env) statements(ctx context.Context, mon *pgxpool.Pool) map[int64]stmtStat {
	if !e.pgss {
		return nil
	}
	rows, err := mon.Query(ctx, monitorMark+`
SELECT queryid, query, calls, total_exec_time, rows, shared_blks_hit, shared_blks_read,
       wal_records, wal_bytes::bigint
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND queryid IS NOT NULL AND query NOT LIKE '%skipq-bench monitor%'`)
	if err != nil {
		return nil
	}
	defer rows.Close()
	out := map[int64]stmtStat{}
	for rows.Next() {
		var id int64
		var q string
		var s stmtStat
		if rows.Scan(&id, &q, &s.calls, &s.totalMS, &s.rows, &s.hit, &s.read, &s.walRecs, &s.walB) == nil {
			s.label = statementLabel(q)
			out[id] = s
		}
	}
	if rows.Err() != nil {
		return nil
	}
	return out
}

// statementLabel names a statement: its sqlc name ("-- name: X"), else its
// first words.
func statementLabel(q string) string {
	if rest, ok := strings.CutPrefix(q, "-- name: "); ok {
		if f := strings.Fields(rest); len(f) > 0 {
			return f[0]
		}
	}
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > 60 {
		q = q[:57] + "..."
	}
	return q
}

// diffStatements is what happened between two snapshots: the top n by
// execution time, and every statement's calls per second.
func diffStatements(a, b map[int64]stmtStat, secs float64, n int) ([]Statement, float64) {
	if a == nil || b == nil {
		return nil, 0
	}
	// One statement may have several entries (e.g. planned with different
	// parameter types): they are summed by name.
	byName := map[string]stmtStat{}
	var calls int64
	var totalMS float64
	for id, s := range b {
		d := s.plus(a[id], -1)
		if d.calls <= 0 {
			continue
		}
		calls += d.calls
		totalMS += d.totalMS
		byName[d.label] = byName[d.label].plus(d, 1)
	}
	var out []Statement
	for name, d := range byName {
		out = append(out, Statement{Name: name, Calls: d.calls, CallsPerS: round(float64(d.calls)/secs, 1),
			TotalMS: round(d.totalMS, 1), MeanMS: round(d.totalMS/float64(d.calls), 3),
			RowsPerCall:       round(float64(d.rows)/float64(d.calls), 1),
			BuffersPerCall:    round(float64(d.hit+d.read)/float64(d.calls), 1),
			WALRecordsPerCall: round(float64(d.walRecs)/float64(d.calls), 1),
			WALBytesPerCall:   round(float64(d.walB)/float64(d.calls), 0)})
	}
	for i := range out {
		out[i].Percent = round(100*out[i].TotalMS/max(totalMS, 1e-9), 1)
	}
	slices.SortFunc(out, func(x, y Statement) int {
		return cmp.Or(cmp.Compare(y.TotalMS, x.TotalMS), cmp.Compare(y.Calls, x.Calls))
	})
	if len(out) > n {
		out = out[:n]
	}
	return out, round(float64(calls)/secs, 1)
}

// cpuSnap is the machine's CPU time by kind, this process's, and the
// database server's (when it runs on this machine), in clock ticks.
type cpuSnap struct {
	ok                          bool
	total, idle, iowait, kernel int64 // kernel: irq and softirq, which no process is charged for
	steal                       int64 // time the hypervisor gave to others
	self, postgres              int64
	postgresOK                  bool
	nodes                       int64 // the node processes' (env.nodeProcs)
	nodesOK                     bool
}

// cpuSnapshot reads /proc/stat, /proc/self/stat and the server's processes.
func (e *env) cpuSnapshot(ctx context.Context) cpuSnap {
	var s cpuSnap
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 6 || f[0] != "cpu" {
		return s
	}
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i >= 8 { // guest time is already in user
			break
		}
		s.total += n
		switch i {
		case 3:
			s.idle = n
		case 4:
			s.iowait = n
		case 5, 6:
			s.kernel += n
		case 7:
			s.steal = n
		}
	}
	s.self, _ = procCPU("self")
	s.nodes, s.nodesOK = nodesCPU(e.nodeProcs)
	if pm := e.postmasterPID(ctx); pm > 0 {
		s.postgres, s.postgresOK = serverCPU(pm)
	}
	s.ok = true
	return s
}

// share is the window's CPU split, in percent of the machine (all cores).
func (a cpuSnap) share(b cpuSnap) CPUShare {
	if !a.ok || !b.ok || b.total <= a.total {
		return CPUShare{}
	}
	t := float64(b.total - a.total)
	pct := func(x int64) float64 { return round(100*float64(x)/t, 1) }
	out := CPUShare{
		Idle:   pct(b.idle - a.idle),
		IOWait: pct(b.iowait - a.iowait),
		Bench:  pct(b.self - a.self),
	}
	if a.postgresOK && b.postgresOK {
		out.Postgres = pct(b.postgres - a.postgres)
	}
	if a.nodesOK && b.nodesOK {
		out.Nodes = pct(b.nodes - a.nodes)
	}
	out.Kernel = pct(b.kernel - a.kernel)
	out.Steal = pct(b.steal - a.steal)
	out.Other = round(max(0, 100-out.Idle-out.IOWait-out.Kernel-out.Steal-out.Bench-out.Nodes-out.Postgres), 1)
	return out
}

// nodesCPU sums the CPU time of the node processes in ticks; false when
// there are none or one has gone.
func nodesCPU(procs []*nodeProcess) (int64, bool) {
	var total int64
	for _, p := range procs {
		t, ok := procCPU(p.pid)
		if !ok {
			return 0, false
		}
		total += t
	}
	return total, len(procs) > 0
}

var postmaster atomic.Int64

// postmasterPID is the database server's main process when it runs on this
// machine (a backend's parent), else 0.
func (e *env) postmasterPID(ctx context.Context) int {
	if pid := postmaster.Load(); pid != 0 {
		return int(pid)
	}
	var backend int
	if e.mon.QueryRow(ctx, monitorMark+"SELECT pg_backend_pid()").Scan(&backend) != nil {
		return 0
	}
	st, err := os.ReadFile("/proc/" + strconv.Itoa(backend) + "/stat")
	if err != nil || !bytes.Contains(st, []byte("(postgres)")) {
		postmaster.Store(-1)
		return 0
	}
	f := statFields(st)
	if len(f) < 2 {
		return 0
	}
	pm, _ := strconv.Atoi(f[1])
	postmaster.Store(int64(pm))
	return pm
}

// statFields are the fields of /proc/PID/stat after the command name:
// state, ppid, ...
func statFields(st []byte) []string {
	i := bytes.LastIndexByte(st, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(st[i+1:]))
}

// The fields of statFields that hold CPU time in ticks.
const (
	statUtime  = 11
	statStime  = 12
	statCutime = 13 // of the children the process reaped
	statCstime = 14
)

// statTicks sums fields of statFields (CPU times in ticks); false when the
// stat line is too short to hold them all.
func statTicks(f []string, fields ...int) (int64, bool) {
	var total int64
	for _, i := range fields {
		if i >= len(f) {
			return 0, false
		}
		n, _ := strconv.ParseInt(f[i], 10, 64)
		total += n
	}
	return total, true
}

// procCPU is a process's user+system time in ticks.
func procCPU(pid string) (int64, bool) {
	st, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, false
	}
	return statTicks(statFields(st), statUtime, statStime)
}

// serverCPU sums the CPU time of the postmaster and its children (backends,
// WAL writer, checkpointer, autovacuum), those that exited included: the
// postmaster reaps its children, and the kernel then adds their time to its
// cutime and cstime. So the sum only grows, even when a window's autovacuum
// worker or a pooled connection's backend ends inside it. The postmaster is
// read before its children: a child reaped between the two reads is missing
// from that snapshot, never counted twice.
func serverCPU(pm int) (int64, bool) {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pm) + "/stat")
	if err != nil {
		return 0, false
	}
	total, ok := statTicks(statFields(st), statUtime, statStime, statCutime, statCstime)
	if !ok {
		return 0, false
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	want := strconv.Itoa(pm)
	for _, d := range ents {
		name := d.Name()
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		st, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		f := statFields(st)
		if len(f) < 2 || f[1] != want {
			continue
		}
		if t, ok := statTicks(f, statUtime, statStime); ok {
			total += t
		}
	}
	return total, true
}

func cpus() int { return runtime.NumCPU() }

// rssSampler samples this process's resident memory every 50 ms, keeping
// the peak of lifecycle runs apart from the peak of everything else.
type rssSampler struct {
	lifecycle atomic.Bool
	mu        sync.Mutex
	peakLife  int64 // kB
	peakAll   int64
	cancel    func()
	done      chan struct{}
}

func startRSSSampler() *rssSampler {
	ctx, cancel := context.WithCancel(context.Background())
	r := &rssSampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			r.sample()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return r
}

func (r *rssSampler) sample() {
	kb := statusKB("VmRSS:")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.peakAll = max(r.peakAll, kb)
	if r.lifecycle.Load() {
		r.peakLife = max(r.peakLife, kb)
	}
}

func (r *rssSampler) stop() {
	r.cancel()
	<-r.done
}

// during marks lifecycle runs (on) and their end (off).
func (r *rssSampler) during(on bool) {
	if on {
		r.lifecycle.Store(true)
		r.sample()
	} else {
		r.sample()
		r.lifecycle.Store(false)
	}
}

// peak is the peak RSS in MB: of the lifecycle runs when they ran, else of
// the whole run.
func (r *rssSampler) peak(lifecycle bool) (float64, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if lifecycle && r.peakLife > 0 {
		return round(float64(r.peakLife)/1024, 1), "the bench process (nodes and load generators) during the lifecycle runs"
	}
	return round(float64(r.peakAll)/1024, 1), "the bench process (nodes and load generators) over the whole run"
}

// highWater is the kernel's VmHWM: the peak over the process's life.
func (r *rssSampler) highWater() float64 { return round(float64(statusKB("VmHWM:"))/1024, 1) }

// mbNow is the current RSS in MB.
func rssNowMB() float64 { return round(float64(statusKB("VmRSS:"))/1024, 1) }

func statusKB(key string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times: 100
// on every Linux the bench runs on.
const clockTicks = 100

// selfCPU is the CPU time (user and system) this process used so far, to
// the microsecond.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CPUPerMessage is a window's CPU time per acked message, in microseconds.
type CPUPerMessage struct {
	// Bench is this process's: for an HTTP run the in-process nodes and
	// their load generators (HTTP clients), for a plain-SQL run its load
	// generators (pgx clients) alone; the load generators alone as well
	// when the nodes run in processes of their own (Nodes).
	Bench float64 `json:"bench_process"`
	// Nodes is the node processes' (to the clock tick, 10 ms) when the
	// nodes run in processes of their own (the sqs scenario), else 0.
	Nodes float64 `json:"node_processes,omitempty"`
	// Postgres is the database server's processes' (to the clock tick,
	// 10 ms), 0 when the server is not on this machine.
	Postgres float64 `json:"postgres"`
}

// perMessage fills rs.CPUPerMessage once rs.Acked is known.
func (rs *RunStats) perMessage() {
	if rs.Acked <= 0 {
		return
	}
	us := func(d time.Duration) float64 { return round(float64(d.Microseconds())/float64(rs.Acked), 1) }
	rs.CPUPerMessage = CPUPerMessage{Bench: us(rs.selfCPU), Nodes: us(rs.nodesCPU), Postgres: us(rs.postgresCPU)}
	per := func(n int64) float64 { return round(float64(n)/float64(rs.Acked), 3) }
	rs.PerMessage = DBPerMessage{Commits: per(rs.commits), Fsyncs: per(rs.fsyncs), WALBytes: round(float64(rs.walBytes)/float64(rs.Acked), 0)}
	pm := func(v float64) float64 { return round(v/float64(rs.Acked), 2) }
	for name, t := range rs.tables {
		w := TableWrites{pm(t.Inserted), pm(t.Updated), pm(t.HOTUpdated), pm(t.Deleted)}
		if w == (TableWrites{}) {
			continue // a worker's or the other side's leftovers
		}
		if rs.PerMessage.Rows == nil {
			rs.PerMessage.Rows = map[string]TableWrites{}
		}
		rs.PerMessage.Rows[name] = w
	}
}

// DBPerMessage is the database's work per acked message of a window: what
// each message costs, comparable between runs of different speeds.
type DBPerMessage struct {
	Commits  float64 `json:"commits"`
	Fsyncs   float64 `json:"fsyncs"`    // WAL flushes (pg_stat_wal.wal_sync)
	WALBytes float64 `json:"wal_bytes"` // the whole server's WAL, vacuum's and the worker's included
	// Rows are the rows each table gained, changed and lost per message.
	Rows map[string]TableWrites `json:"rows,omitempty"`
}

// RunStats is the evidence of one measured window.
type RunStats struct {
	Seconds float64  `json:"seconds"`
	Acked   int64    `json:"acked"`
	CPU     CPUShare `json:"cpu"`
	// CPUPerMessage is the CPU time per acked message of the window.
	CPUPerMessage                  CPUPerMessage `json:"cpu_us_per_message"`
	selfCPU, nodesCPU, postgresCPU time.Duration
	// PerMessage is the database's commits, fsyncs and WAL per acked
	// message of the window.
	PerMessage                DBPerMessage `json:"db_per_message"`
	commits, fsyncs, walBytes int64
	tables                    map[string]TableWrites
	ActiveBackends            float64     `json:"active_backends"` // average busy backends
	Waits                     []Share     `json:"waits"`           // of busy backend samples
	CommitsPerS               float64     `json:"commits_per_s"`
	FsyncsPerS                float64     `json:"fsyncs_per_s"`
	WALMBPerS                 float64     `json:"wal_mb_per_s"`
	StatementsPerS            float64     `json:"statements_per_s"`
	Statements                []Statement `json:"statements"` // top by execution time
	// skipq.messages: vacuums (auto or not) that finished in the window,
	// and dead tuples at its end (pg_stat_user_tables, which lags ~1 s).
	Vacuums    int64 `json:"vacuums"`
	DeadTuples int64 `json:"dead_tuples"`
}

// CPUShare is the window's CPU in percent of the whole machine.
type CPUShare struct {
	Bench    float64 `json:"bench_process"`            // nodes + load generators (in-process), or the load generators alone (Nodes)
	Nodes    float64 `json:"node_processes,omitempty"` // the nodes when they run in processes of their own
	Postgres float64 `json:"postgres"`
	Other    float64 `json:"other"`  // other processes
	Kernel   float64 `json:"kernel"` // irq and softirq (loopback networking)
	Steal    float64 `json:"steal"`  // taken by the hypervisor
	IOWait   float64 `json:"iowait"`
	Idle     float64 `json:"idle"`
}

// Share is a named percentage.
type Share struct {
	Name    string  `json:"name"`
	Percent float64 `json:"percent"`
}

// Statement is one statement's share of a window (pg_stat_statements).
type Statement struct {
	Name           string  `json:"name"`
	Calls          int64   `json:"calls"`
	CallsPerS      float64 `json:"calls_per_s"`
	TotalMS        float64 `json:"total_ms"`
	MeanMS         float64 `json:"mean_ms"`
	Percent        float64 `json:"percent"` // of the window's statement execution time
	RowsPerCall    float64 `json:"rows_per_call"`
	BuffersPerCall float64 `json:"buffers_per_call"`
	// WAL the statement wrote (pg_stat_statements; a function's inner
	// statements count in its call).
	WALRecordsPerCall float64 `json:"wal_records_per_call"`
	WALBytesPerCall   float64 `json:"wal_bytes_per_call"`
}
