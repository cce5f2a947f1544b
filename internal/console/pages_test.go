package console_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// page GETs a console page (auth off) and returns its HTML.
func page(t *testing.T, n *testNode, path string) string {
	t.Helper()
	resp, body := send(t, n, http.MethodGet, path, nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, body)
	}
	return body
}

// contains fails the test for each want the HTML lacks.
func contains(t *testing.T, what, html string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(html, w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
}

// deadLetter sends a message to queue, whose dead-letter queue is
// queue+".dlq", and nacks its only allowed delivery: it waits in the
// dead-letter queue.
func (n *testNode) deadLetter(t *testing.T, queue, id string) {
	t.Helper()
	n.mustAPI(t, n.admin, http.MethodPut, "/v1/queues/"+queue, map[string]any{"maxReceiveCount": 1, "deadLetterQueue": queue + ".dlq"}, http.StatusCreated)
	n.mustAPI(t, n.admin, http.MethodPost, "/v1/queues/"+queue+"/messages", map[string]any{"body": "b", "messageId": id}, http.StatusCreated)
	got := n.mustAPI(t, n.admin, http.MethodPost, "/v1/queues/"+queue+"/messages/receive", map[string]any{"waitSeconds": 0}, http.StatusOK)
	handle := got["messages"].([]any)[0].(map[string]any)["receiptHandle"]
	n.mustAPI(t, n.admin, http.MethodPost, "/v1/receipts/nack", map[string]any{"receiptHandle": handle}, http.StatusOK)
}

// A dead letter waiting in its dead-letter queue is available there on
// every console page, as on the API's routes; the search's dead_lettered
// filter finds it.
func TestDeadLetterStateInConsole(t *testing.T) {
	n := startNode(t, false)
	n.deadLetter(t, "work", "dl-1")
	state := regexp.MustCompile(`data-testid="(?:message|browse|search)-state">([a-z_]+)`)
	states := func(path string) []string {
		t.Helper()
		var out []string
		for _, m := range state.FindAllStringSubmatch(page(t, n, path), -1) {
			out = append(out, m[1])
		}
		return out
	}
	for _, path := range []string{"/console/queues/work.dlq/messages/dl-1", "/console/queues/work.dlq",
		"/console/search?state=dead_lettered", "/console/search?queuePrefix=work.dlq"} {
		if got := states(path); len(got) != 1 || got[0] != "available" {
			t.Errorf("%s: states %v, want [available]", path, got)
		}
	}
	contains(t, "the dead letter's page", page(t, n, "/console/queues/work.dlq/messages/dl-1"), "(a dead letter waiting here)")
}

// The queues page counts the small queues at request time: 20 messages
// just sent show as 20; a larger queue shows the snapshot, marked ≈, and the
// page says how old it is. "Dead-lettered" is labelled as what came from a
// queue, and a dead-letter queue is marked as one.
func TestQueuesPageSaysWhatItCounts(t *testing.T) {
	n := startNode(t, false)
	n.deadLetter(t, "work", "dl-1")
	batch := make([]any, 20)
	for i := range batch {
		batch[i] = map[string]any{"body": "b"}
	}
	n.mustAPI(t, "", http.MethodPost, "/v1/queues/fresh/messages/batch", map[string]any{"messages": batch}, http.StatusCreated)
	large := make([]any, 1000)
	for i := range large {
		large[i] = map[string]any{"body": "b"}
	}
	n.mustAPI(t, "", http.MethodPost, "/v1/queues/large/messages/batch", map[string]any{"messages": large}, http.StatusCreated)

	html := page(t, n, "/console/")
	contains(t, "the queues page", html, "Dead-lettered from here", "Counted now for the queues of fewer than 100 messages",
		"recounted every 15s", "a queue's own page counts at request time")
	rows := map[string]string{}
	for _, row := range strings.Split(html, `<tr data-testid="queue-row" data-queue="`)[1:] {
		name, rest, _ := strings.Cut(row, `"`)
		rows[name] = rest
	}
	contains(t, "fresh's row", rows["fresh"], `data-counted="now"`, `data-testid="count-available">20<`)
	contains(t, "work.dlq's row", rows["work.dlq"], `data-counted="now"`, `data-testid="count-available">1<`,
		`standard · <span data-testid="dead-letter-queue"`)
	if strings.Contains(rows["work"], "dead-letter-queue") {
		t.Errorf("work's row says it is a dead-letter queue:\n%s", rows["work"])
	}
	contains(t, "large's row", rows["large"], `data-counted="snapshot"`)
	if !regexp.MustCompile(`data-testid="count-available">(?:≈ \d+|—)<`).MatchString(rows["large"]) {
		t.Errorf("large's row does not show the snapshot's count:\n%s", rows["large"])
	}
	contains(t, "the queue page", page(t, n, "/console/queues/work"), "Dead-lettered from here")
}

// The first visit of the rates page shows no 0.0 that nothing measured:
// "—" and "measuring…" until the next refresh.
func TestRatesMeasuringOnFirstVisit(t *testing.T) {
	n := startNode(t, false)
	n.mustAPI(t, "", http.MethodPost, "/v1/queues/q/messages", map[string]any{"body": "b"}, http.StatusCreated)
	html := page(t, n, "/console/rates")
	contains(t, "the first rates page", html, "measuring…", `data-testid="rate-sent">—<`, `data-testid="rate-received">—<`,
		`data-testid="rate-acked">—<`)
	if strings.Contains(html, "0.0") {
		t.Error("the first rates page shows 0.0")
	}
}

// Settings and message fields have human labels with the API's name as a
// hint.
func TestFieldLabels(t *testing.T) {
	n := startNode(t, false)
	n.mustAPI(t, "", http.MethodPost, "/v1/queues/q/messages", map[string]any{"body": "b", "messageId": "m-1"}, http.StatusCreated)
	contains(t, "the settings form", page(t, n, "/console/queues/q"),
		`Lease of a receive, seconds <span class="hint">visibilitySeconds</span>`,
		`Most deliveries of a message (0: the server's maximum) <span class="hint">maxReceiveCount</span>`)
	contains(t, "the message page", page(t, n, "/console/queues/q/messages/m-1"),
		`<dt>Deliveries so far <span class="hint">receiveCount</span></dt>`,
		`<dt>Leased until <span class="hint">visibleUntil</span></dt>`)
}

// Long queue names and ids stay on one line, cut with their whole text on
// hover: no page scrolls sideways; search's timestamps and ids do not wrap;
// the redrive box shows its whole placeholder.
func TestLongNamesFit(t *testing.T) {
	n := startNode(t, false)
	long := strings.Repeat("longqueuename", 7) + "012345678" // 100 bytes, no place to break a line
	n.deadLetter(t, long, "dl-1")
	n.mustAPI(t, "", http.MethodPost, "/v1/queues/"+long+"/messages", map[string]any{"body": "b",
		"messageId": "0195a2b4-7c1d-7e3f-9a0b-1c2d3e4f5a6b"}, http.StatusCreated)
	tab := browser(t)
	pages := watch(t, tab)
	oneLine := func(sel string) bool {
		return run(t, tab, chromedp.Evaluate[bool](`(() => {
			const el = document.querySelector(`+"`"+sel+"`"+`); const r = document.createRange();
			r.selectNodeContents(el); return new Set([...r.getClientRects()].map(c => Math.round(c.top))).size === 1 })()`))
	}
	for _, path := range []string{"/console/", "/console/dlq", "/console/search", "/console/queues/" + long,
		"/console/queues/" + long + ".dlq/messages/dl-1"} {
		do(t, tab, chromedp.Navigate(n.URL+path), chromedp.WaitVisible("main h1"))
		if wide := run(t, tab, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > document.documentElement.clientWidth`)); wide {
			t.Errorf("%s scrolls sideways", path)
		}
	}
	do(t, tab, chromedp.Navigate(n.URL+"/console/"), chromedp.WaitVisible(testID("queue-row")))
	if title := run(t, tab, chromedp.Evaluate[string](`document.querySelector('[data-queue="`+long+`"] a').title`)); title != long {
		t.Errorf("the name's title is %q, want the whole name", title)
	}
	do(t, tab, chromedp.Navigate(n.URL+"/console/search?queuePrefix="+long), chromedp.WaitVisible(testID("search-row")))
	for _, cell := range []string{"td:nth-child(1)", "td:nth-child(4) a"} {
		if !oneLine(`[data-testid="search-row"] ` + cell) {
			t.Errorf("search: %s wraps", cell)
		}
	}
	do(t, tab, chromedp.Navigate(n.URL+"/console/dlq"), chromedp.WaitVisible(testID("redrive-all-to")))
	fits := run(t, tab, chromedp.Evaluate[bool](`(() => {
		const input = document.querySelector('[data-testid="redrive-all-to"]'), s = getComputedStyle(input);
		const ctx = document.createElement("canvas").getContext("2d"); ctx.font = s.font;
		const room = input.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
		return ctx.measureText(input.placeholder).width <= room })()`))
	if !fits {
		t.Error("the redrive box clips its placeholder")
	}
	pages.clean(t, n.URL)
}
