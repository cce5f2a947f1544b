package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skipq/skipq/internal/node"
)

// login opens the login page and logs in with key.
func login(t *testing.T, tab context.Context, n *testNode, key string) {
	t.Helper()
	do(t, tab,
		chromedp.Navigate(n.URL+"/console/"),
		chromedp.WaitVisible(testID("api-key")),
		chromedp.SendKeys(testID("api-key"), key),
	)
	submit(t, tab, testID("login"))
}

// A read key sees its tenant's queues and messages and no action control;
// an action it posts anyway, from the console's own page, is refused.
func TestReadKeySeesNoActions(t *testing.T) {
	n := startNode(t, true)
	n.mustAPI(t, n.admin, http.MethodPut, "/v1/queues/orders.dlq", map[string]any{}, http.StatusCreated)
	n.mustAPI(t, n.admin, http.MethodPut, "/v1/queues/orders", map[string]any{"deadLetterQueue": "orders.dlq", "maxReceiveCount": 1}, http.StatusCreated)
	sent := n.mustAPI(t, n.write, http.MethodPost, "/v1/queues/orders/messages", map[string]any{"body": "order 1"}, http.StatusCreated)
	id := sent["messageId"].(string)
	n.mustAPI(t, n.write, http.MethodPost, "/v1/queues/orders/messages", map[string]any{"body": "order 2"}, http.StatusCreated)
	got := n.mustAPI(t, n.write, http.MethodPost, "/v1/queues/orders/messages/receive", map[string]any{"waitSeconds": 0}, http.StatusOK)
	handle := got["messages"].([]any)[0].(map[string]any)["receiptHandle"]
	n.mustAPI(t, "", http.MethodPost, "/v1/receipts/nack", map[string]any{"receiptHandle": handle, "reason": "<b>declined</b>"}, http.StatusOK)
	other := n.key(t, "other", "admin")
	n.mustAPI(t, other, http.MethodPut, "/v1/queues/secret", map[string]any{}, http.StatusCreated)

	tab := browser(t)
	login(t, tab, n, n.read)
	if who := text(t, tab, testID("identity")); !strings.Contains(who, "read") {
		t.Fatalf("header: %q", who)
	}
	// The overview shows the snapshot once the worker took one, polling.
	poll(t, tab, `document.querySelector('[data-queue="orders"] [data-testid="count-dead-lettered"]').textContent.trim() === "1"`, 30*time.Second)
	if c := count(t, tab, `[data-testid="queue-row"]`); c != 2 {
		t.Fatalf("%d queue rows, want 2 (another tenant's queue must not show)", c)
	}
	for _, page := range []string{"/console/queues/orders", "/console/dlq", "/console/queues/orders/messages/" + id,
		"/console/queues/orders.dlq"} {
		do(t, tab, chromedp.Navigate(n.URL+page), chromedp.WaitVisible("main h1"))
		if c := count(t, tab, `[data-testid^="action-"], form[method="post"]:not([action="/console/logout"])`); c != 0 {
			t.Errorf("%s: a read key sees %d action controls", page, c)
		}
	}
	// Why it died, escaped.
	do(t, tab, chromedp.Navigate(n.URL+"/console/dlq"), chromedp.WaitVisible(testID("dlq-why")))
	if got := text(t, tab, testID("dlq-why")); got != "nack ×1: <b>declined</b>" {
		t.Fatalf("dead letter's cause shown as %q", got)
	}
	do(t, tab, chromedp.Navigate(n.URL+"/console/queues/orders"), chromedp.WaitVisible(testID("message-row")))
	if got := text(t, tab, testID("count-available")); got != "1" {
		t.Fatalf("available %q, want 1", got)
	}
	// A forged purge from the page itself (same origin, htmx header).
	status := run(t, tab, chromedp.Evaluate[int](`fetch("/console/queues/orders/purge", {method: "POST",
		headers: {"HX-Request": "true", "Content-Type": "application/x-www-form-urlencoded"}, body: "confirm=orders"}).then(r => r.status)`,
		chromedp.EvalAwaitPromise))
	if status != http.StatusForbidden {
		t.Fatalf("a read key's purge: %d, want 403", status)
	}
	if s := n.stats(t, n.admin, "orders"); s["available"] != 1.0 {
		t.Fatalf("after the refused purge: %v", s)
	}
	do(t, tab, chromedp.Navigate(n.URL+"/console/queues/secret"), chromedp.WaitVisible(testID("error")))
	if msg := text(t, tab, testID("error")); !strings.Contains(msg, "does not exist") {
		t.Fatalf("another tenant's queue: %q", msg)
	}
}

// An admin sends from the form, browses, opens the message, deletes it,
// purges and deletes the queue, and the page asks for nothing outside the
// node.
func TestAdminSendsBrowsesPurgesDeletes(t *testing.T) {
	n := startNode(t, true)
	n.mustAPI(t, n.admin, http.MethodPut, "/v1/queues/jobs", map[string]any{}, http.StatusCreated)
	tab := browser(t)
	pages := watch(t, tab)
	login(t, tab, n, n.admin)
	do(t, tab, chromedp.Navigate(n.URL+"/console/queues/jobs"), chromedp.WaitVisible(testID("action-send")),
		chromedp.SendKeys(testID("send-body"), "hello from the console"),
	)
	submit(t, tab, testID("action-send"))
	if got := text(t, tab, testID("count-available")); got != "1" {
		t.Fatalf("available after the send: %q", got)
	}
	if s := n.stats(t, n.admin, "jobs"); s["available"] != 1.0 {
		t.Fatalf("the API sees %v", s)
	}
	submit(t, tab, `[data-testid="message-row"] a`)
	if body := text(t, tab, testID("message-body")); body != "hello from the console" {
		t.Fatalf("body %q", body)
	}
	id := text(t, tab, testID("message-id"))
	submit(t, tab, testID("action-delete-message"))
	n.mustAPI(t, n.admin, http.MethodGet, "/v1/queues/jobs/messages/"+id, nil, http.StatusNotFound)

	// Settings: the admin's form changes what it shows, nothing else.
	do(t, tab, chromedp.Navigate(n.URL+"/console/queues/jobs"), chromedp.WaitVisible(testID("action-save-settings")),
		chromedp.SetValue(`input[name="visibilitySeconds"]`, "120"))
	submit(t, tab, testID("action-save-settings"))
	if q := n.mustAPI(t, n.admin, http.MethodGet, "/v1/queues/jobs", nil, http.StatusOK); q["visibilitySeconds"] != 120.0 || q["dedupWindowSeconds"] != 300.0 {
		t.Fatalf("after saving the settings: %v", q)
	}

	for i := range 3 {
		n.mustAPI(t, n.admin, http.MethodPost, "/v1/queues/jobs/messages", map[string]any{"body": fmt.Sprint("job ", i)}, http.StatusCreated)
	}
	// Purge wants the queue's name typed in.
	do(t, tab, chromedp.Navigate(n.URL+"/console/queues/jobs"), chromedp.WaitVisible(testID("action-purge")),
		chromedp.SendKeys(testID("purge-confirm"), "job"))
	submit(t, tab, testID("action-purge"))
	if msg := text(t, tab, testID("error")); !strings.Contains(msg, "type the queue's name") {
		t.Fatalf("purge without the name: %q", msg)
	}
	if s := n.stats(t, n.admin, "jobs"); s["available"] != 3.0 {
		t.Fatalf("a purge without the name removed messages: %v", s)
	}
	n.seedHistory(t, "jobs")
	do(t, tab, chromedp.Navigate(n.URL+"/console/queues/jobs"), chromedp.WaitVisible(testID("message-row")))
	screenshot(t, tab, "queue")
	do(t, tab, chromedp.SendKeys(testID("purge-confirm"), "jobs"))
	submit(t, tab, testID("action-purge"))
	if s := n.stats(t, n.admin, "jobs"); s["available"] != 0.0 {
		t.Fatalf("after the purge: %v", s)
	}
	do(t, tab, chromedp.SendKeys(testID("delete-confirm"), "jobs"))
	submit(t, tab, testID("action-delete-queue"))
	if msg := text(t, tab, testID("flash")); msg != "Deleted queue jobs." {
		t.Fatalf("after the delete: %q", msg)
	}
	n.mustAPI(t, n.admin, http.MethodGet, "/v1/queues/jobs", nil, http.StatusNotFound)
	pages.clean(t, n.URL)
}

// Message text is shown as text: a script in a body, a tag or metadata
// runs nothing.
func TestMessageTextIsEscaped(t *testing.T) {
	n := startNode(t, false)
	body := `<script>window.x=1</script>`
	sent := n.mustAPI(t, "", http.MethodPost, "/v1/queues/xss/messages", map[string]any{"body": body,
		"metadata": `<img src=x onerror="window.y=1">`, "tags": map[string]string{"t": `"><script>window.z=1</script>`}}, http.StatusCreated)
	tab := browser(t)
	pages := watch(t, tab)
	do(t, tab, chromedp.Navigate(n.URL+"/console/queues/xss/messages/"+sent["messageId"].(string)),
		chromedp.WaitVisible(testID("message-body")))
	if got := text(t, tab, testID("message-body")); got != body {
		t.Fatalf("body shown as %q", got)
	}
	if ran := run(t, tab, chromedp.Evaluate[bool](`window.x !== undefined || window.y !== undefined || window.z !== undefined`)); ran {
		t.Fatal("a script from the message ran")
	}
	do(t, tab, chromedp.Navigate(n.URL+"/console/queues/xss"), chromedp.WaitVisible(testID("message-row")))
	if ran := run(t, tab, chromedp.Evaluate[bool](`window.x !== undefined`)); ran {
		t.Fatal("a script from the message ran on the queue page")
	}
	pages.clean(t, n.URL)
}

// The message page lists a traced message's history across the queues it
// went through, with the key of each API call; an untraced message says
// so; the settings form turns tracing on.
func TestMessageHistory(t *testing.T) {
	n := startNode(t, true)
	n.mustAPI(t, n.admin, http.MethodPut, "/v1/queues/traced", map[string]any{"trace": true, "maxReceiveCount": 1,
		"deadLetterQueue": "traced.dlq"}, http.StatusCreated)
	id := n.mustAPI(t, n.write, http.MethodPost, "/v1/queues/traced/messages", map[string]any{"body": "b"}, http.StatusCreated)["messageId"].(string)
	got := n.mustAPI(t, n.write, http.MethodPost, "/v1/queues/traced/messages/receive", map[string]any{"waitSeconds": 0}, http.StatusOK)
	handle := got["messages"].([]any)[0].(map[string]any)["receiptHandle"]
	n.mustAPI(t, n.write, http.MethodPost, "/v1/receipts/nack", map[string]any{"receiptHandle": handle, "reason": "<i>no</i>"}, http.StatusOK)
	redriven := n.mustAPI(t, n.write, http.MethodPost, "/v1/queues/traced.dlq/messages/"+id+"/redrive", nil, http.StatusOK)["redrivenAs"].(map[string]any)
	n.mustAPI(t, n.write, http.MethodPost, "/v1/queues/plain/messages", map[string]any{"body": "p", "messageId": "p-1"}, http.StatusCreated)
	// A traced dead letter waiting in its dead-letter queue: its page shows
	// every field a message can have filled, and is the picture of a message.
	n.mustAPI(t, n.admin, http.MethodPut, "/v1/queues/payments", map[string]any{"trace": true, "maxReceiveCount": 1,
		"deadLetterQueue": "payments.dlq"}, http.StatusCreated)
	waiting := n.mustAPI(t, n.write, http.MethodPost, "/v1/queues/payments/messages", map[string]any{"body": `{"orderId": 7, "amount": "12.50"}`,
		"clientId": "checkout", "metadata": "content-type=application/json", "tags": map[string]string{"customer": "c-42"}}, http.StatusCreated)["messageId"].(string)
	got = n.mustAPI(t, n.write, http.MethodPost, "/v1/queues/payments/messages/receive", map[string]any{"waitSeconds": 0}, http.StatusOK)
	handle = got["messages"].([]any)[0].(map[string]any)["receiptHandle"]
	n.mustAPI(t, n.write, http.MethodPost, "/v1/receipts/nack", map[string]any{"receiptHandle": handle, "reason": "card declined"}, http.StatusOK)

	tab := browser(t)
	pages := watch(t, tab)
	login(t, tab, n, n.admin)
	do(t, tab, chromedp.Navigate(n.URL+"/console/queues/traced/messages/"+redriven["messageId"].(string)),
		chromedp.WaitVisible(testID("history")))
	types := run(t, tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid="history-row"]')].map(r => r.dataset.type)`))
	if want := "sent received nacked dead_lettered redriven"; strings.Join(types, " ") != want {
		t.Fatalf("history rows %v, want %s", types, want)
	}
	nacked := `[data-testid="history-row"][data-type="nacked"]`
	if d := text(t, tab, nacked+` [data-testid="history-details"]`); d != "reason: <i>no</i>" {
		t.Errorf("the nack's details: %q", d)
	}
	if k := text(t, tab, nacked+` td:nth-child(4)`); !strings.HasPrefix(k, "key ") {
		t.Errorf("the nack's key: %q, want the write key's id", k)
	}
	if d := text(t, tab, `[data-testid="history-row"][data-type="redriven"] [data-testid="history-details"]`); d != "to traced as "+redriven["messageId"].(string) {
		t.Errorf("the redrive's details: %q", d)
	}
	do(t, tab, chromedp.Navigate(n.URL+"/console/queues/payments.dlq/messages/"+waiting), chromedp.WaitVisible(testID("history")))
	if d := text(t, tab, testID("dead-letter")); d != "nack of delivery 1 in payments: card declined" {
		t.Errorf("the waiting dead letter's deadLetter: %q", d)
	}
	screenshot(t, tab, "message")

	do(t, tab, chromedp.Navigate(n.URL+"/console/queues/plain/messages/p-1"), chromedp.WaitVisible(testID("history-none")))
	do(t, tab, chromedp.Navigate(n.URL+"/console/queues/plain"), chromedp.WaitVisible(testID("settings-trace")),
		chromedp.Click(testID("settings-trace")))
	submit(t, tab, testID("action-save-settings"))
	if q := n.mustAPI(t, n.admin, http.MethodGet, "/v1/queues/plain", nil, http.StatusOK); q["trace"] != true {
		t.Fatalf("after checking trace and saving: %v", q)
	}
	pages.clean(t, n.URL)
}

// Search finds messages across queues by prefix, state and tag, with the
// filters kept on the next page's link.
func TestSearchPage(t *testing.T) {
	const pageSize = 50 // the console's
	n := startNode(t, false)
	batch := make([]any, pageSize+2)
	for i := range batch {
		batch[i] = map[string]any{"body": fmt.Sprint("one ", i), "tags": map[string]string{"k": "v"}}
	}
	n.mustAPI(t, "", http.MethodPost, "/v1/queues/app.one/messages/batch", map[string]any{"messages": batch}, http.StatusCreated)
	n.mustAPI(t, "", http.MethodPost, "/v1/queues/app.two/messages", map[string]any{"body": "two", "delaySeconds": 600}, http.StatusCreated)
	n.mustAPI(t, "", http.MethodPost, "/v1/queues/other/messages", map[string]any{"body": "other", "tags": map[string]string{"k": "v"}}, http.StatusCreated)
	tab := browser(t)
	do(t, tab, chromedp.Navigate(n.URL+"/console/search"), chromedp.WaitVisible(testID("search-submit")),
		chromedp.SetValue(testID("search-prefix"), "app."), chromedp.SetValue(testID("search-tag"), "k:v"))
	submit(t, tab, testID("search-submit"))
	if c := count(t, tab, `[data-testid="search-row"][data-queue="app.one"]`); c != pageSize {
		t.Fatalf("prefix app. and tag k:v: %d rows of app.one on page 1, want %d", c, pageSize)
	}
	screenshotTop(t, tab, "search")
	submit(t, tab, testID("next-page"))
	if c := count(t, tab, `[data-testid="search-row"][data-queue="app.one"]`); c != 2 || count(t, tab, testID("search-row")) != 2 {
		t.Fatalf("page 2 holds %d rows of app.one, want the last 2 and nothing else", c)
	}
	do(t, tab, chromedp.Navigate(n.URL+"/console/search?queuePrefix=app.&state=delayed"), chromedp.WaitVisible(testID("search-row")))
	if c := count(t, tab, `[data-testid="search-row"][data-queue="app.two"]`); c != 1 || count(t, tab, testID("search-row")) != 1 {
		t.Fatalf("delayed in app.*: %d rows of app.two", c)
	}
}

// Dead letters: redrive one, then all of a dead-letter queue, checked
// through the API.
func TestRedrive(t *testing.T) {
	n := startNode(t, false)
	n.mustAPI(t, "", http.MethodPut, "/v1/queues/src", map[string]any{"deadLetterQueue": "src.dlq", "maxReceiveCount": 1}, http.StatusCreated)
	// More than one step of redrive all (1,000), so the page loops.
	const total = 1005
	for start := 0; start < total; start += 1000 {
		var batch []map[string]any
		for i := start; i < min(total, start+1000); i++ {
			batch = append(batch, map[string]any{"body": fmt.Sprint("m", i)})
		}
		n.mustAPI(t, "", http.MethodPost, "/v1/queues/src/messages/batch", map[string]any{"messages": batch}, http.StatusCreated)
	}
	got := n.mustAPI(t, "", http.MethodPost, "/v1/queues/src/messages/receive", map[string]any{"maxMessages": total, "waitSeconds": 0}, http.StatusOK)
	var handles []any
	for _, m := range got["messages"].([]any) {
		handles = append(handles, m.(map[string]any)["receiptHandle"])
	}
	n.mustAPI(t, "", http.MethodPost, "/v1/receipts/nack", map[string]any{"receiptHandles": handles}, http.StatusOK)
	if s := n.stats(t, "", "src.dlq"); s["available"] != float64(total) {
		t.Fatalf("dead-letter queue: %v", s)
	}

	tab := browser(t)
	pages := watch(t, tab)
	do(t, tab, chromedp.Navigate(n.URL+"/console/dlq"), chromedp.WaitVisible(testID("dlq-row")))
	if c := count(t, tab, testID("dlq-row")); c != 50 {
		t.Fatalf("%d dead-letter rows, want a page of 50", c)
	}
	screenshotTop(t, tab, "dead-letters")
	first := run(t, tab, chromedp.AttributeValue(testID("dlq-row"), "data-message-id"))
	submit(t, tab, testID("next-page"))
	second := run(t, tab, chromedp.AttributeValue(testID("dlq-row"), "data-message-id"))
	if c := count(t, tab, testID("dlq-row")); c != 50 || second.Value == first.Value {
		t.Fatalf("the next page: %d rows, first %v after %v", c, second, first)
	}
	do(t, tab, chromedp.Navigate(n.URL+"/console/dlq"), chromedp.WaitVisible(testID("dlq-row")))
	submit(t, tab, `[data-testid="dlq-row"] [data-testid="action-redrive"]`)
	if s := n.stats(t, "", "src"); s["available"] != 1.0 {
		t.Fatalf("after one redrive the source has %v", s)
	}
	do(t, tab, chromedp.Click(`[data-testid="action-redrive-all"][data-queue="src.dlq"]`),
		chromedp.WaitVisible(testID("redrive-done")))
	if moved := text(t, tab, testID("redrive-moved")); moved != fmt.Sprint(total-1) {
		t.Fatalf("moved %s, want %d", moved, total-1)
	}
	if s := n.stats(t, "", "src"); s["available"] != float64(total) {
		t.Fatalf("after redrive all the source has %v", s)
	}
	if s := n.stats(t, "", "src.dlq"); s["available"] != 0.0 {
		t.Fatalf("after redrive all the dead-letter queue has %v", s)
	}
	pages.clean(t, n.URL)
}

// The queues overview (small queues counted at request time, the table
// refreshed by polling, the snapshot's age; the prefix filter; the depth
// chart) and this node's rates.
func TestOverviewAndRates(t *testing.T) {
	n := startNode(t, false)
	n.mustAPI(t, "", http.MethodPut, "/v1/queues/emails", map[string]any{"deadLetterQueue": "emails.dlq"}, http.StatusCreated)
	for i, q := range []string{"billing", "emails", "emails.dlq", "orders"} {
		for j := range (i + 1) * 3 {
			n.mustAPI(t, "", http.MethodPost, "/v1/queues/"+q+"/messages", map[string]any{"body": fmt.Sprint("m", j)}, http.StatusCreated)
		}
	}
	n.mustAPI(t, "", http.MethodPost, "/v1/queues/orders/messages/receive", map[string]any{"maxMessages": 4, "waitSeconds": 0}, http.StatusOK)
	tab := browser(t)
	pages := watch(t, tab)
	do(t, tab, chromedp.Navigate(n.URL+"/console/"), chromedp.WaitVisible(testID("queue-row")))
	poll(t, tab, `document.querySelector('[data-queue="orders"] [data-testid="count-in-flight"]').textContent.trim() === "4"`, 30*time.Second)
	if got := text(t, tab, `[data-queue="orders"] `+testID("count-available")); got != "8" {
		t.Fatalf("orders available %q, want 8", got)
	}
	// Sent after the page loaded: the next poll shows them.
	for range 2 {
		n.mustAPI(t, "", http.MethodPost, "/v1/queues/billing/messages", map[string]any{"body": "later"}, http.StatusCreated)
	}
	poll(t, tab, `document.querySelector('[data-queue="billing"] [data-testid="count-available"]').textContent.trim() === "5"`, 30*time.Second)
	// The snapshot (dead-lettered from here) comes with the worker's first count, and its age with it.
	poll(t, tab, `!document.querySelector('[data-testid="snapshot-age"]').textContent.includes("none taken yet")`, 30*time.Second)
	// The prefix filter.
	do(t, tab, chromedp.Navigate(n.URL+"/console/?prefix=emails"), chromedp.WaitVisible(testID("queue-row")))
	if c := count(t, tab, testID("queue-row")); c != 2 {
		t.Fatalf("prefix emails: %d rows", c)
	}
	// The depth chart draws the recorded snapshots (the worker's recording
	// is tested in service).
	n.seedHistory(t, "orders")
	do(t, tab, chromedp.Navigate(n.URL+"/console/"), chromedp.WaitVisible(testID("depth-chart")))
	if pts := run(t, tab, chromedp.Evaluate[int](`Number(document.querySelector('[data-testid="depth-chart"]').dataset.points)`)); pts < 59 {
		t.Fatalf("the chart drew %d snapshots, want at least 59", pts)
	}
	screenshot(t, tab, "queues")
	do(t, tab, chromedp.Navigate(n.URL+"/console/rates"), chromedp.WaitVisible(testID("rates")))
	for i := range 20 {
		n.mustAPI(t, "", http.MethodPost, "/v1/queues/orders/messages", map[string]any{"body": fmt.Sprint("more ", i)}, http.StatusCreated)
	}
	// The next poll compares the node's counters with the first sample.
	poll(t, tab, `Number(document.querySelector('[data-testid="rate-sent"]').textContent) > 0`, 20*time.Second)
	screenshot(t, tab, "rates")
	pages.clean(t, n.URL)
}

// The console's HTTP contract without a browser: login, cookies, CSRF,
// headers, SKIPQ_CONSOLE=false.
func TestLoginSessionsAndCSRF(t *testing.T) {
	n := startNode(t, true)
	request := func(method, path string, form url.Values, headers map[string]string, cookies ...*http.Cookie) *http.Response {
		t.Helper()
		resp, _ := send(t, n, method, path, form, headers, cookies...)
		return resp
	}
	get := func(path string, cookies ...*http.Cookie) *http.Response {
		t.Helper()
		return request(http.MethodGet, path, nil, nil, cookies...)
	}
	post := func(path string, form url.Values, headers map[string]string, cookies ...*http.Cookie) *http.Response {
		t.Helper()
		return request(http.MethodPost, path, form, headers, cookies...)
	}
	resp := get("/console/")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/login" {
		t.Fatalf("without a session: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Fatalf("CSP %q", csp)
	}
	resp = get("/console/login")
	var csrf *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "skipq_console_csrf" {
			csrf = c
		}
	}
	if resp.StatusCode != http.StatusOK || csrf == nil {
		t.Fatalf("login page: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	same := map[string]string{"Origin": n.URL}
	if resp := post("/console/login", url.Values{"apiKey": {"skq_wrong"}, "csrf": {csrf.Value}}, same, csrf); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong key: %d", resp.StatusCode)
	}
	// Without the token (or HX-Request), or from another origin: 403.
	if resp := post("/console/login", url.Values{"apiKey": {n.admin}}, same, csrf); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("login without a CSRF token: %d", resp.StatusCode)
	}
	if resp := post("/console/login", url.Values{"apiKey": {n.admin}, "csrf": {csrf.Value}}, map[string]string{"Origin": "http://evil.example"}, csrf); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("login from another origin: %d", resp.StatusCode)
	}
	resp = post("/console/login", url.Values{"apiKey": {n.write}, "csrf": {csrf.Value}}, same, csrf)
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "skipq_console" {
			session = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/" || session == nil {
		t.Fatalf("login: %d %s %v", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	if !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.MaxAge != 43200 {
		t.Fatalf("session cookie %+v", session)
	}
	if resp := get("/console/", session); resp.StatusCode != http.StatusOK {
		t.Fatalf("with the session: %d", resp.StatusCode)
	}
	n.mustAPI(t, n.admin, http.MethodPost, "/v1/queues/q/messages", map[string]any{"body": "x"}, http.StatusCreated)
	purge := url.Values{"confirm": {"q"}, "csrf": {csrf.Value}}
	// A cross-site form post (no Origin header of ours, no HX-Request) is refused.
	if resp := post("/console/queues/q/purge", purge, map[string]string{"Origin": "http://127.0.0.2:1"}, session, csrf); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin purge: %d", resp.StatusCode)
	}
	if resp := post("/console/queues/q/purge", url.Values{"confirm": {"q"}}, map[string]string{"Sec-Fetch-Site": "same-origin"}, session); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("purge without a token: %d", resp.StatusCode)
	}
	// A write key may purge but not delete the queue (admin).
	if resp := post("/console/queues/q/delete", purge, same, session, csrf); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a write key's queue delete: %d", resp.StatusCode)
	}
	if resp := post("/console/queues/q/purge", url.Values{"confirm": {"q"}}, map[string]string{"Sec-Fetch-Site": "same-origin", "HX-Request": "true"}, session); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("purge: %d", resp.StatusCode)
	}
	if s := n.stats(t, n.admin, "q"); s["available"] != 0.0 {
		t.Fatalf("after the purge: %v", s)
	}
	// A forged or expired session is no session.
	forged := &http.Cookie{Name: "skipq_console", Value: "1." + fmt.Sprint(time.Now().Add(time.Hour).Unix()) + ".AAAA"}
	if resp := get("/console/", forged); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a forged session: %d", resp.StatusCode)
	}
	if resp := post("/console/logout", url.Values{"csrf": {csrf.Value}}, same, session, csrf); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", resp.StatusCode)
	} else if c := resp.Cookies(); len(c) != 1 || c[0].MaxAge >= 0 {
		t.Fatalf("logout cookies %v", c)
	}

	if resp := get("/console/static/"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("static directory: %d", resp.StatusCode)
	}
	if resp := get("/console/static/htmx.min.js"); resp.StatusCode != http.StatusOK {
		t.Fatalf("htmx: %d", resp.StatusCode)
	}
	// A poll whose session ended sends the page to the login.
	req, _ := http.NewRequest(http.MethodGet, n.URL+"/console/queue-rows", nil)
	req.Header.Set("HX-Request", "true")
	if resp, err := noRedirects.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("HX-Redirect") != "/console/login" {
		t.Fatalf("a poll without a session: %v %v", resp, err)
	}

	off := startNode(t, false, func(c *node.Config) { c.Console = false })
	if resp, err := http.Get(off.URL + "/console/"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("SKIPQ_CONSOLE=false: %v %v", resp, err)
	}
}

// The console's routes count against SKIPQ_RATE_LIMIT like the API's.
func TestRateLimited(t *testing.T) {
	n := startNode(t, false, func(c *node.Config) { c.RateLimit, c.RateBurst = 0.01, 2 })
	var statuses []int
	for range 3 {
		resp, err := http.Get(n.URL + "/console/rates")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
	}
	if statuses[0] != http.StatusOK || statuses[2] != http.StatusTooManyRequests {
		t.Fatalf("statuses %v, want 200 … 429", statuses)
	}
}

// With the database away, pages answer 503 with Retry-After.
func TestDatabaseAway(t *testing.T) {
	n := startNode(t, false, func(c *node.Config) {
		c.DatabaseURL = fmt.Sprintf("postgres://skipq@127.0.0.1:%d/skipq?sslmode=disable&connect_timeout=1", freePort(t))
		c.Migrate = false
	})
	for _, p := range []string{"/console/", "/console/queue-rows", "/console/queues/q", "/console/dlq"} {
		resp, err := http.Get(n.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: %d, Retry-After %q", p, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
}

// A search whose prefix or cursor holds text Postgres cannot hold (NUL,
// invalid UTF-8) answers the console's 400 page, not a 500.
func TestSearchRefusesNonText(t *testing.T) {
	n := startNode(t, false)
	for _, q := range []string{"queuePrefix=a%00", "queuePrefix=%ff", "cursor=eyJ0IjoxLCJxIjoiYVx1MDAwMCIsInMiOjF9"} {
		resp, err := http.Get(n.URL + "/console/search?" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("%s: %d %s", q, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
}
