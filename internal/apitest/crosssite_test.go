package apitest

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/skipq/skipq/internal/node"
)

// A web page may not change anything on a node its visitor reaches: a
// browser request that changes state from a page of another origin is 403,
// whether the browser says so in Sec-Fetch-Site or in Origin, including a
// DNS-rebound name pointing at the node (its Origin and Host agree, but
// neither is the node's); the node's own pages and clients that are no
// browser (no Origin, no Sec-Fetch-Site) go on working.
func TestCrossSiteRequestsChangeNothing(t *testing.T) {
	n := newNode(t) // auth off: the public origins are the loopback names at its port
	u, err := url.Parse(n.URL)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	purge := func(t *testing.T, n *testNode, host string, headers ...string) response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, n.URL+"/v1/queues/q/purge", strings.NewReader(""))
		if err != nil {
			t.Fatal(err)
		}
		// A "simple" request: a page may send it with no preflight.
		req.Header.Set("Content-Type", "text/plain")
		if host != "" {
			req.Host = host
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return response{Status: resp.StatusCode, Header: resp.Header}
	}
	available := func(t *testing.T, n *testNode, headers ...string) int64 {
		t.Helper()
		r := n.do(t, http.MethodGet, "/v1/queues/q", nil, headers...)
		if r.Status != http.StatusOK {
			t.Fatalf("GET /v1/queues/q: %d %s", r.Status, r.Raw)
		}
		return num(r.Body["stats"].(map[string]any)["available"])
	}
	n.send(t, "q", map[string]any{"body": "x"})
	refused := []struct {
		name    string
		host    string
		headers []string
	}{
		{"another origin", "", []string{"Origin", "http://evil.example"}},
		{"Sec-Fetch-Site cross-site", "", []string{"Sec-Fetch-Site", "cross-site"}},
		{"Sec-Fetch-Site same-site", "", []string{"Sec-Fetch-Site", "same-site", "Origin", "http://a.localhost:" + port}},
		{"an opaque origin", "", []string{"Origin", "null"}},
		{"DNS rebinding", "rebind.example:" + port, []string{"Origin", "http://rebind.example:" + port, "Sec-Fetch-Site", "same-origin"}},
		{"the loopback name at another port", "", []string{"Origin", "http://localhost:1"}},
	}
	for _, tc := range refused {
		if r := purge(t, n, tc.host, tc.headers...); r.Status != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", tc.name, r.Status)
		}
	}
	if got := available(t, n); got != 1 {
		t.Fatalf("after the refused purges: %d available, want 1", got)
	}
	// The envelope, checked against the document.
	r := n.do(t, http.MethodPost, "/v1/queues/q/messages", map[string]any{"body": "y"}, "Origin", "http://evil.example")
	wantError(t, r, http.StatusForbidden, "access_denied")
	// Reading is not refused (the browser keeps a cross-site page from
	// reading the answer).
	if got := available(t, n, "Origin", "http://evil.example"); got != 1 {
		t.Fatalf("available %d", got)
	}
	for _, origin := range []string{n.URL, "http://localhost:" + port, "http://[::1]:" + port} {
		n.send(t, "q", map[string]any{"body": "x"})
		if r := purge(t, n, "", "Origin", origin, "Sec-Fetch-Site", "same-origin"); r.Status != http.StatusOK {
			t.Errorf("a page of %s: %d, want 200", origin, r.Status)
		}
	}
	n.send(t, "q", map[string]any{"body": "x"})
	if r := purge(t, n, ""); r.Status != http.StatusOK {
		t.Errorf("no browser: %d, want 200", r.Status)
	}

	// SKIPQ_PUBLIC_ORIGIN names the origins instead.
	p := startNode(t, n.DB, func(c *node.Config) { c.PublicOrigin = "https://queues.example.com, http://ops.example:8080" })
	p.send(t, "q", map[string]any{"body": "x"})
	if r := purge(t, p, "", "Origin", p.URL); r.Status != http.StatusForbidden {
		t.Errorf("a loopback page when SKIPQ_PUBLIC_ORIGIN names others: %d, want 403", r.Status)
	}
	for _, origin := range []string{"https://queues.example.com", "http://ops.example:8080"} {
		if r := purge(t, p, "", "Origin", origin); r.Status != http.StatusOK {
			t.Errorf("a page of %s: %d, want 200", origin, r.Status)
		}
	}

	// With auth on and no SKIPQ_PUBLIC_ORIGIN, the request's own origin,
	// and still no cross-site request.
	a := startNode(t, n.DB, func(c *node.Config) { c.Auth = "required" })
	_, admin := createKey(t, newPool(t, n.DB), "default", "admin")
	key := "Bearer " + admin
	for _, tc := range []struct {
		headers []string
		want    int
	}{
		{[]string{"Authorization", key, "Origin", "http://evil.example"}, http.StatusForbidden},
		{[]string{"Authorization", key, "Origin", a.URL, "Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{[]string{"Authorization", key, "Origin", a.URL, "Sec-Fetch-Site", "same-origin"}, http.StatusOK},
		{[]string{"Authorization", key}, http.StatusOK},
	} {
		if r := purge(t, a, "", tc.headers...); r.Status != tc.want {
			t.Errorf("auth on, %v: %d, want %d", tc.headers[2:], r.Status, tc.want)
		}
	}
}
