package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/node"
	"github.com/skipq/skipq/internal/service"
)

// The search scenario's tenant: searchQueues queues, searchFIFOQueues of
// them FIFO, under three prefixes (".a." standard, ".b." standard, ".f."
// FIFO). Message g goes to queue g mod searchQueues; its state is g mod 20
// (searchStateOf); on a FIFO queue its group is one of searchGroups, except
// on the last queue, whose messages (1 %) are all in the group "big".
const (
	searchQueues     = 100
	searchAQueues    = 50
	searchFIFOQueues = 20
	searchGroups     = 100
	// searchWideQueues queues of a tenant of their own hold as many
	// messages again, for the cases over one prefix of that many queues
	// (in-process nodes only: with --url there is one key, one tenant).
	searchWideQueues = 1000
	// searchSpan is how far back the messages' sentAt reach, evenly.
	searchSpan = time.Hour
	// The measured requests per case (after searchWarmup unmeasured ones).
	searchSamples      = 50
	searchQuickSamples = 15
	searchWarmup       = 3
	// searchTargetMS is the search target's p99 of a page of 100 (docs/PERFORMANCE.md).
	searchTargetMS = 100
)

// searchStateOf is the state of message g, by g mod 20, in SQL: 75 %
// available, 10 % delayed, 10 % in flight, 5 % dead-lettered (in a queue
// because it was dead-lettered there, not yet received).
const searchStateOf = `CASE WHEN g % 20 IN (14, 15) THEN 'delayed' WHEN g % 20 IN (16, 17) THEN 'in_flight'
                            WHEN g % 20 = 18 THEN 'dead_lettered' ELSE 'available' END`

// search measures the search target (docs/PERFORMANCE.md): GET /v1/messages answers a page of
// 100 within 100 ms (p99) with a million messages in the tenant, for each
// single filter and for queuePrefix + state. The tenant is the scenario's
// own with in-process nodes (an API key of a fresh tenant), so other
// scenarios' messages do not count; with --url it is the key's tenant,
// which may hold more. Its messages
// are written in one INSERT … SELECT in the layout a send leaves (mixed
// states, tags, FIFO groups, spread over an hour of sentAt); then each
// case's requests are timed over HTTP, one at a time, and one page of each
// runs again through skipq's own service on a connection with auto_explain,
// which records the plan of every statement the page ran, the walk's
// per-queue statements included.
func (e *env) search(ctx context.Context) (*SearchResult, error) {
	key, wideKey := e.o.APIKey, ""
	var configure []func(*node.Config)
	if len(e.o.URLs) == 0 {
		keys := auth.New(e.mon, 0)
		for _, k := range []*string{&key, &wideKey} {
			tenant := "bench-search-" + strings.ToLower(rand.Text()[:8])
			_, secret, err := keys.Create(ctx, tenant, "admin", "skipq-bench search")
			if err != nil {
				return nil, fmt.Errorf("search: API key: %w", err)
			}
			*k = secret
		}
		configure = append(configure, func(c *node.Config) { c.Auth = "required" })
	}
	ns, err := e.startNodes(ctx, configure...)
	if err != nil {
		return nil, err
	}
	defer ns.stop()
	hc := newClient(key)
	defer hc.close()

	base := queueName("search")
	res := &SearchResult{Messages: e.o.Preload, Queues: searchQueues, FIFOQueues: searchFIFOQueues, Groups: searchGroups}
	names := make([]string, searchQueues)
	for i := range names {
		prefix, settings := ".a.", ""
		switch {
		case i >= searchQueues-searchFIFOQueues:
			prefix, settings = ".f.", `{"fifo":true}`
		case i >= searchAQueues:
			prefix = ".b."
		}
		names[i] = fmt.Sprintf("%s%s%03d", base, prefix, i)
		if err := hc.createQueue(ctx, ns.at(0), names[i], settings); err != nil {
			return nil, err
		}
	}
	var tenant string
	if err := e.mon.QueryRow(ctx, monitorMark+"SELECT tenant FROM skipq.queues WHERE name = $1", names[0]).Scan(&tenant); err != nil {
		return nil, fmt.Errorf("search: queue %s: %w", names[0], err)
	}
	e.logf("search: loading %d messages into %d queues", e.o.Preload, searchQueues)
	newest := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	if res.LoadSeconds, err = e.searchLoad(ctx, tenant, names, newest, e.o.Preload); err != nil {
		return nil, err
	}
	e.checkpoint(ctx)

	after, before := newest.Add(-40*time.Minute), newest.Add(-30*time.Minute)
	mid := "m-" + strconv.Itoa(e.o.Preload/2)
	cases := []searchCaseSpec{
		{"no filter", "", service.SearchOptions{}},
		{"queue", "queue=" + url.QueryEscape(names[7]), service.SearchOptions{Queues: names[7:8]}},
		{"queuePrefix (50 queues)", "queuePrefix=" + url.QueryEscape(base+".a."), service.SearchOptions{QueuePrefix: base + ".a."}},
		{"state=available", "state=available", service.SearchOptions{States: []string{"available"}}},
		{"state=delayed", "state=delayed", service.SearchOptions{States: []string{"delayed"}}},
		{"state=in_flight", "state=in_flight", service.SearchOptions{States: []string{"in_flight"}}},
		{"state=dead_lettered", "state=dead_lettered", service.SearchOptions{States: []string{"dead_lettered"}}},
		{"state=acked (none)", "state=acked", service.SearchOptions{States: []string{"acked"}}},
		{"sentAfter/sentBefore (10 min)", "sentAfter=" + url.QueryEscape(after.Format(time.RFC3339Nano)) +
			"&sentBefore=" + url.QueryEscape(before.Format(time.RFC3339Nano)), service.SearchOptions{SentAfter: &after, SentBefore: &before}},
		{"tag (1 in 7)", "tag=color:c3", service.SearchOptions{Tags: map[string]string{"color": "c3"}}},
		{"messageId", "messageId=" + mid, service.SearchOptions{MessageID: mid}},
		{"groupId", "groupId=g7", service.SearchOptions{GroupID: "g7"}},
		{"groupId (one group of 1 % of the messages)", "groupId=big", service.SearchOptions{GroupID: "big"}},
		{"queuePrefix (30 queues) + state=in_flight", "queuePrefix=" + url.QueryEscape(base+".b.") + "&state=in_flight",
			service.SearchOptions{QueuePrefix: base + ".b.", States: []string{"in_flight"}}},
	}
	samples := searchSamples
	if e.o.Quick {
		samples = searchQuickSamples
	}
	explainer, note := e.searchExplainer(ctx)
	if explainer != nil {
		defer explainer.close()
	}
	res.ExplainNote = note
	cpu0 := e.cpuSnapshot(ctx)
	for _, c := range cases {
		sc, err := e.searchCase(ctx, hc, ns.at(0), tenant, c, samples, explainer)
		if err != nil {
			return res, err
		}
		res.Cases = append(res.Cases, *sc)
	}
	if wideKey != "" {
		wide, err := e.searchWide(ctx, ns.at(0), wideKey, newest, samples, explainer)
		if err != nil {
			return res, err
		}
		res.Cases = append(res.Cases, wide...)
	}
	res.CPU = cpu0.share(e.cpuSnapshot(ctx))
	e.noteCPU(res.CPU)

	// A database of our own is dropped at the end; in someone else's, the
	// messages go now.
	if e.o.DatabaseURL != "" {
		e.logf("search: removing its queues")
		for _, q := range names {
			if err := hc.do(ctx, http.MethodDelete, queuePath(ns.at(0), q), nil, http.StatusNoContent, nil); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// searchWide times the cases over one prefix of searchWideQueues queues
// (the target: no filter combination scans the whole table per request; a
// search's budget holds whatever the number of queues and the page size),
// in a tenant of their own holding Preload messages spread over them.
func (e *env) searchWide(ctx context.Context, base, key string, newest time.Time, samples int, explainer *searchExplainer) ([]SearchCase, error) {
	hc := newClient(key)
	defer hc.close()
	prefix := queueName("search") + ".w."
	names := make([]string, searchWideQueues)
	for i := range names {
		names[i] = fmt.Sprintf("%s%04d", prefix, i)
		if err := hc.createQueue(ctx, base, names[i], ""); err != nil {
			return nil, err
		}
	}
	if e.o.DatabaseURL != "" { // someone else's database: its messages go at the end
		defer func() {
			for _, q := range names {
				_ = hc.do(ctx, http.MethodDelete, queuePath(base, q), nil, http.StatusNoContent, nil)
			}
		}()
	}
	var tenant string
	if err := e.mon.QueryRow(ctx, monitorMark+"SELECT tenant FROM skipq.queues WHERE name = $1", names[0]).Scan(&tenant); err != nil {
		return nil, fmt.Errorf("search: queue %s: %w", names[0], err)
	}
	e.logf("search: loading %d messages into %d queues of one prefix", e.o.Preload, searchWideQueues)
	if _, err := e.searchLoad(ctx, tenant, names, newest, e.o.Preload); err != nil {
		return nil, err
	}
	e.checkpoint(ctx)
	var out []SearchCase
	for _, c := range []searchCaseSpec{
		{"queuePrefix (1,000 queues)", "queuePrefix=" + url.QueryEscape(prefix), service.SearchOptions{QueuePrefix: prefix}},
		{"queuePrefix (1,000 queues), limit=1000", "queuePrefix=" + url.QueryEscape(prefix) + "&limit=1000",
			service.SearchOptions{QueuePrefix: prefix, Limit: 1000}},
	} {
		sc, err := e.searchCase(ctx, hc, base, tenant, c, samples, explainer)
		if err != nil {
			return out, err
		}
		out = append(out, *sc)
	}
	return out, nil
}

// searchCaseSpec is one search case: as a request's query and as the
// service's options (for its plans).
type searchCaseSpec struct {
	name, query string
	o           service.SearchOptions
}

// searchCase times one case's first page over HTTP and, with an
// explainer, records the plans of one page of it.
func (e *env) searchCase(ctx context.Context, hc *client, base, tenant string, c searchCaseSpec, samples int,
	explainer *searchExplainer) (*SearchCase, error) {
	sc, err := searchRequests(ctx, hc, base, c.query, samples)
	if err != nil {
		return nil, fmt.Errorf("search %s: %w", c.name, err)
	}
	sc.Name, sc.Query = c.name, c.query
	if explainer != nil {
		if sc.Statements, err = explainer.page(ctx, tenant, c.o); err != nil {
			return nil, fmt.Errorf("search %s: explain: %w", c.name, err)
		}
	}
	e.logf("  %-44s p50 %6.1f ms  p99 %6.1f ms  %3d messages%s", c.name, sc.P50MS, sc.P99MS, sc.Items,
		map[bool]string{true: " + cursor", false: ""}[sc.NextCursor])
	return sc, nil
}

// searchLoad writes n messages into the queues (names, in order) in one
// statement, sentAt spread evenly over searchSpan up to newest, and
// analyzes the table. It returns the seconds it took.
func (e *env) searchLoad(ctx context.Context, tenant string, names []string, newest time.Time, n int) (float64, error) {
	// A lease token makes a message in flight; ready rows, timers and
	// group rows are left out: nobody receives from these queues, and the
	// search reads none of them.
	return e.bulkLoad(ctx, "skipq.messages", `
WITH q AS (
    SELECT array_agg(id ORDER BY name) AS ids, array_agg(fifo ORDER BY name) AS fifo
    FROM skipq.queues WHERE tenant = $1 AND name = ANY($2::text[])
)
INSERT INTO skipq.messages (queue_id, message_id, body, tags, sent_at, visible_at, delayed_to,
    receive_count, first_received_at, max_receive_count, re_routed_from, dead_lettered_at, lease_token,
    ready, group_id)
SELECT q.ids[1 + g % $4], 'm-' || g, $5::bytea,
       jsonb_build_object('color', 'c' || (g % 7), 'n', (g % 1000)::text),
       t.sent,
       CASE WHEN s.st IN ('delayed', 'in_flight') THEN now() + interval '1 hour' ELSE t.sent END,
       CASE WHEN s.st = 'delayed' THEN now() + interval '1 hour' END,
       CASE WHEN s.st = 'in_flight' THEN 1 ELSE 0 END,
       CASE WHEN s.st = 'in_flight' THEN now() END,
       10,
       CASE WHEN s.st = 'dead_lettered' THEN 'bench.search.source' END,
       CASE WHEN s.st = 'dead_lettered' THEN t.sent END,
       CASE WHEN s.st = 'in_flight' THEN '\x01'::bytea END,
       s.st = 'available',
       CASE WHEN 1 + g % $4 = $4 THEN 'big' WHEN q.fifo[1 + g % $4] THEN 'g' || ((g / $4) % $6) END
FROM q, generate_series(1, $3::int) AS g
CROSS JOIN LATERAL (SELECT $7::timestamptz - $8::float8 * ($3 - g) / $3 * interval '1 second' AS sent) t
CROSS JOIN LATERAL (SELECT `+searchStateOf+` AS st) s
ORDER BY g`, tenant, names, n, len(names), []byte(payload), searchGroups, newest, searchSpan.Seconds())
}

// searchRequests times samples requests of one search's first page, one at
// a time, after searchWarmup unmeasured ones.
func searchRequests(ctx context.Context, hc *client, base, query string, samples int) (*SearchCase, error) {
	sc := &SearchCase{Samples: samples}
	var page struct {
		Messages   []json.RawMessage `json:"messages"`
		NextCursor string            `json:"nextCursor"`
	}
	u := base + "/v1/messages?" + query
	var ms []float64
	for i := range searchWarmup + samples {
		start := time.Now()
		if err := hc.do(ctx, http.MethodGet, u, nil, http.StatusOK, &page); err != nil {
			return nil, err
		}
		if i >= searchWarmup {
			ms = append(ms, float64(time.Since(start).Microseconds())/1000)
		}
	}
	slices.Sort(ms)
	sc.P50MS, sc.P99MS, sc.MaxMS = round(quantile(ms, 0.5), 2), round(quantile(ms, 0.99), 2), round(ms[len(ms)-1], 2)
	sc.Items, sc.NextCursor = len(page.Messages), page.NextCursor != ""
	return sc, nil
}

// searchExplainer runs a search page through skipq's service on one
// connection that has auto_explain log every statement's plan (nested ones
// too: the walk's per-queue statements) to the client as notices.
type searchExplainer struct {
	pool *pgxpool.Pool
	svc  *service.Service

	mu      sync.Mutex
	notices []string
}

func (x *searchExplainer) close() { x.pool.Close() }

// searchExplainer is nil, with the reason, where auto_explain cannot be
// loaded (it takes a superuser).
func (e *env) searchExplainer(ctx context.Context) (*searchExplainer, string) {
	if !e.super {
		return nil, "no plans: loading auto_explain takes a superuser"
	}
	cfg, err := pgxpool.ParseConfig(e.dbURL)
	if err != nil {
		return nil, "no plans: " + err.Error()
	}
	x := &searchExplainer{}
	cfg.MaxConns, cfg.MinConns = 1, 0
	cfg.ConnConfig.RuntimeParams["application_name"] = monitorApp
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		x.mu.Lock()
		defer x.mu.Unlock()
		x.notices = append(x.notices, n.Message)
	}
	// Session settings on the bench's own connection, never a node's.
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on; SET auto_explain.log_buffers = on;
SET auto_explain.log_nested_statements = on; SET client_min_messages = log`)
		return err
	}
	if x.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, "no plans: " + err.Error()
	}
	if err := x.pool.Ping(ctx); err != nil {
		x.pool.Close()
		return nil, "no plans: " + err.Error()
	}
	x.svc = service.New(x.pool, service.Options{Limits: service.DefaultLimits()})
	return x, ""
}

// page runs the first page of query (of 100 unless it says) and returns the plans of what it ran:
// each top-level statement, and of each nested one (the walk's, run once
// per queue) its slowest run, with how many runs there were.
func (x *searchExplainer) page(ctx context.Context, tenant string, o service.SearchOptions) ([]SearchStatement, error) {
	if o.Limit == 0 {
		o.Limit = 100
	}
	// Once unmeasured, as a node's warm connection has compiled the walk.
	if _, _, err := x.svc.SearchMessages(ctx, tenant, o); err != nil {
		return nil, err
	}
	x.mu.Lock()
	x.notices = nil
	x.mu.Unlock()
	if _, _, err := x.svc.SearchMessages(ctx, tenant, o); err != nil {
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	var out, nested []SearchStatement
	runs := map[string]int{}
	for _, n := range x.notices {
		st, ok := parseAutoExplain(n)
		switch {
		case !ok:
		case strings.HasPrefix(st.Name, "-- name:"):
			out = append(out, st)
		default:
			runs[st.Name]++
			i := slices.IndexFunc(nested, func(o SearchStatement) bool { return o.Name == st.Name })
			if i < 0 {
				nested = append(nested, st)
			} else if st.DurationMS > nested[i].DurationMS {
				nested[i] = st
			}
		}
	}
	for _, st := range nested {
		st.Name = fmt.Sprintf("nested, slowest of %d runs: %s", runs[st.Name], st.Name)
		out = append(out, st)
	}
	return out, nil
}

var reAutoExplain = regexp.MustCompile(`^duration: ([\d.]+) ms\s+plan:\n`)

// parseAutoExplain reads one auto_explain notice (text format): its
// duration, the first line of its query text, and the plan from its root
// node on (the query text before it may run over many lines).
func parseAutoExplain(msg string) (SearchStatement, bool) {
	m := reAutoExplain.FindStringSubmatch(msg)
	if m == nil {
		return SearchStatement{}, false
	}
	var st SearchStatement
	st.DurationMS, _ = strconv.ParseFloat(m[1], 64)
	lines := strings.Split(strings.TrimPrefix(msg, m[0]), "\n")
	for i, l := range lines {
		if st.Name == "" && strings.HasPrefix(l, "Query Text: ") {
			st.Name = strings.TrimSpace(strings.TrimPrefix(l, "Query Text: "))
		}
		if strings.Contains(l, "(actual time=") || strings.Contains(l, "(never executed)") {
			st.Plan = lines[i:]
			break
		}
	}
	return st, st.Plan != nil
}

// SearchResult is the search scenario (docs/API.md#search): a page of 100 of
// GET /v1/messages per filter, in a tenant of Messages messages.
type SearchResult struct {
	Messages    int          `json:"messages"`
	Queues      int          `json:"queues"`
	FIFOQueues  int          `json:"fifo_queues"`
	Groups      int          `json:"groups_per_fifo_queue"`
	LoadSeconds float64      `json:"load_s"`
	Cases       []SearchCase `json:"cases"`
	ExplainNote string       `json:"explain_note,omitempty"` // why a case has no plans
	CPU         CPUShare     `json:"cpu"`
}

// SearchCase is one search's first page, timed over HTTP.
type SearchCase struct {
	Name       string            `json:"name"`
	Query      string            `json:"query"`
	Samples    int               `json:"samples"`
	P50MS      float64           `json:"p50_ms"`
	P99MS      float64           `json:"p99_ms"`
	MaxMS      float64           `json:"max_ms"`
	Items      int               `json:"items"`       // on the page
	NextCursor bool              `json:"next_cursor"` // the page had one
	Statements []SearchStatement `json:"statements"`  // what one page ran (auto_explain)
}

// SearchStatement is one statement a search page ran, with its plan
// (EXPLAIN ANALYZE, BUFFERS, by auto_explain).
type SearchStatement struct {
	Name       string   `json:"name"`
	DurationMS float64  `json:"duration_ms"`
	Plan       []string `json:"plan"`
}

func writeSearch(w io.Writer, s *SearchResult) {
	fmt.Fprintf(w, "search: a page of 100 (GET /v1/messages) in a tenant of %s messages, %d queues (%d FIFO, %d groups each); load %.1f s\n",
		thousands(float64(s.Messages)), s.Queues, s.FIFOQueues, s.Groups, s.LoadSeconds)
	fmt.Fprintf(w, "  %-44s %8s %8s %8s %6s\n", "filter", "p50 ms", "p99 ms", "max ms", "items")
	for _, c := range s.Cases {
		cursor := ""
		if c.NextCursor {
			cursor = " + cursor"
		}
		fmt.Fprintf(w, "  %-44s %8.2f %8.2f %8.2f %6d%s\n", c.Name, c.P50MS, c.P99MS, c.MaxMS, c.Items, cursor)
	}
	if s.ExplainNote != "" {
		fmt.Fprintf(w, "  %s\n", s.ExplainNote)
	}
	for _, c := range s.Cases {
		fmt.Fprintf(w, "  plans of one page, %s (%s):\n", c.Name, c.Query)
		for _, st := range c.Statements {
			fmt.Fprintf(w, "    %.3f ms  %s\n", st.DurationMS, st.Name)
			for _, line := range st.Plan {
				fmt.Fprintf(w, "      %s\n", line)
			}
		}
	}
	fmt.Fprintln(w)
}
