package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"sync"
	"time"
)

// idle parks Options.IdleWaiters long-polls on one queue of one node and
// watches the database for Options.IdleDuration: connections (all, and those
// busy) and statements per second reaching Postgres from the whole service
// (every node's worker included).
func (e *env) idle(ctx context.Context) (*IdleResult, error) {
	// Runs first of all scenarios. Once its node is gone, its waiters'
	// connections, goroutine stacks and buffers (node and load generator:
	// about 60 MB for 1,000) are garbage that the Go runtime would hand back
	// to the system only over minutes: without this the lifecycle runs that
	// follow counted them in their peak RSS.
	defer func() {
		e.http.close()
		debug.FreeOSMemory()
	}()
	ns, err := e.startNodes(ctx)
	if err != nil {
		return nil, err
	}
	defer ns.stop()
	target := ns.urls[0]
	q := queueName("idle")
	if err := e.http.createQueue(ctx, target, q, ""); err != nil {
		return nil, err
	}
	n := e.o.IdleWaiters
	e.logf("idle: %d waiting long-polls for %s", n, e.o.IdleDuration)
	wait := int((e.o.IdleDuration + 60*time.Second).Seconds())
	r := newReceiver(e.http, target, q, 1, wait)

	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	var mu sync.Mutex
	var firstErr error
	for range n {
		wg.Go(func() {
			for wctx.Err() == nil {
				if _, err := r.receive(wctx); err != nil {
					if wctx.Err() == nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
						stop()
					}
					return
				}
			}
		})
	}
	if err := e.waitForWaiters(wctx, []string{target}, n, 60*time.Second); err != nil {
		mu.Lock()
		defer mu.Unlock()
		if firstErr != nil {
			return nil, firstErr
		}
		return nil, err
	}
	// Let the first claims of the burst finish, the pool settle and the
	// backends flush their statistics (at most once a second).
	if !sleepCtx(wctx, 2*time.Second) {
		return nil, firstErr
	}

	res := &IdleResult{Waiters: n}
	s0, c0, cpu0, t0 := e.statements(ctx, e.mon), readDBCounters(ctx, e.mon), e.cpuSnapshot(ctx), time.Now()
	for time.Since(t0) < e.o.IdleDuration {
		var total, busy int
		err := e.mon.QueryRow(ctx, monitorMark+`
SELECT count(*)::int, (count(*) FILTER (WHERE state <> 'idle'))::int FROM pg_stat_activity
WHERE datname = current_database() AND backend_type = 'client backend' AND application_name <> $1`,
			monitorApp).Scan(&total, &busy)
		if err == nil {
			res.DBConnectionsOpen = max(res.DBConnectionsOpen, total)
			res.DBConnections = max(res.DBConnections, busy)
		}
		if !sleepCtx(wctx, 200*time.Millisecond) {
			break
		}
	}
	secs := time.Since(t0).Seconds()
	s1, c1 := e.statements(ctx, e.mon), readDBCounters(ctx, e.mon)
	res.CPU = cpu0.share(e.cpuSnapshot(ctx))
	e.noteCPU(res.CPU)
	res.Seconds = round(secs, 1)
	res.RSSMB = rssNowMB()
	if c0.ok && c1.ok {
		res.CommitsPerS = round(float64(c1.commits-c0.commits)/secs, 1)
	}
	if s0 != nil && s1 != nil {
		res.Statements, res.StatementsPerS = diffStatements(s0, s1, secs, 50)
		res.StatementsSource = "pg_stat_statements"
	} else {
		// One commit per autocommit statement; the monitor's own reads of
		// pg_stat_database are not transactions that write, but count.
		res.StatementsPerS = res.CommitsPerS
		res.StatementsSource = "pg_stat_database.xact_commit"
	}
	// Statements are counted by pg_stat_statements by text: sorting by
	// calls suits the idle view better than by time.
	sortByCalls(res.Statements)
	if len(res.Statements) > 10 {
		res.Statements = res.Statements[:10]
	}
	mu.Lock()
	defer mu.Unlock()
	return res, firstErr
}

func sortByCalls(ss []Statement) {
	slices.SortStableFunc(ss, func(a, b Statement) int { return cmp.Compare(b.Calls, a.Calls) })
}

// IdleResult is the cost of waiting long-polls on one node.
type IdleResult struct {
	Waiters           int         `json:"waiters"`
	DBConnections     int         `json:"db_connections"`      // busy (state != idle), peak
	DBConnectionsOpen int         `json:"db_connections_open"` // every client connection, peak
	StatementsPerS    float64     `json:"statements_per_s"`
	StatementsSource  string      `json:"statements_source"`
	CommitsPerS       float64     `json:"commits_per_s"` // pg_stat_database; backends report it up to 10 s late
	Seconds           float64     `json:"seconds"`
	RSSMB             float64     `json:"rss_mb"`
	Statements        []Statement `json:"statements"`
	CPU               CPUShare    `json:"cpu"`
}

// writeIdle is the idle section of the text report.
func writeIdle(w io.Writer, i *IdleResult) {
	fmt.Fprintf(w, "idle: %d waiting long-polls on one node for %.0f s:\n", i.Waiters, i.Seconds)
	fmt.Fprintf(w, "  database connections in use %d (open %d), %.1f statements/s (%s), RSS %.0f MB\n",
		i.DBConnections, i.DBConnectionsOpen, i.StatementsPerS, i.StatementsSource, i.RSSMB)
	if len(i.Statements) > 0 {
		fmt.Fprintf(w, "  statements:")
		for _, st := range i.Statements {
			fmt.Fprintf(w, " %s %.1f/s", st.Name, st.CallsPerS)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}
