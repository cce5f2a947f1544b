package console_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/node"
)

// loginForm gets the login page's CSRF cookie and the headers a page of
// the node sends with its form.
func loginForm(t *testing.T, n *testNode) (*http.Cookie, map[string]string) {
	t.Helper()
	resp, _ := send(t, n, http.MethodGet, "/console/login", nil, nil)
	csrf := cookie(resp, "skipq_console_csrf")
	if resp.StatusCode != http.StatusOK || csrf == nil {
		t.Fatalf("login page: %d %v", resp.StatusCode, resp.Cookies())
	}
	return csrf, map[string]string{"Origin": n.URL, "Sec-Fetch-Site": "same-origin"}
}

// A copy of skipq.api_keys (a backup, a replica, a monitoring role) opens
// no console session: the cookies its holder can build, keyed with a key's
// secret_hash, with an expiry or issue time as far ahead as it likes, are
// no session. A real login still is one.
func TestKeyTableMintsNoSession(t *testing.T) {
	n := startNode(t, true)
	var keyID int64
	var secretHash []byte
	if err := n.pool.QueryRow(context.Background(),
		`SELECT id, secret_hash FROM skipq.api_keys WHERE role = 'admin'`).Scan(&keyID, &secretHash); err != nil {
		t.Fatal(err)
	}
	mac := func(format string, args ...any) string {
		m := hmac.New(sha256.New, secretHash)
		fmt.Fprintf(m, format, args...)
		return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	}
	far := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	now := time.Now().Unix()
	for name, value := range map[string]string{
		"the old cookie, expiring in 2100": fmt.Sprintf("%d.%d.%s", keyID, far, mac("skipq console session|%d|%d", keyID, far)),
		"the new layout keyed with the hash": fmt.Sprintf("%d.%d.%s", keyID, now,
			mac("skipq console session|%d|%d|%s", keyID, now, secretHash)),
	} {
		resp, _ := send(t, n, http.MethodGet, "/console/", nil, nil, &http.Cookie{Name: "skipq_console", Value: value})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/login" {
			t.Errorf("%s: %d %s, want 303 to the login", name, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	csrf, page := loginForm(t, n)
	resp, _ := send(t, n, http.MethodPost, "/console/login", url.Values{"apiKey": {n.admin}, "csrf": {csrf.Value}}, page, csrf)
	session := cookie(resp, "skipq_console")
	if resp.StatusCode != http.StatusSeeOther || session == nil {
		t.Fatalf("login: %d %v", resp.StatusCode, resp.Cookies())
	}
	if resp, _ := send(t, n, http.MethodGet, "/console/", nil, nil, session); resp.StatusCode != http.StatusOK {
		t.Fatalf("with the session: %d", resp.StatusCode)
	}
}

// The login page is one more way to try keys: it spends the address's
// budget of failed authentications like the API, after which the address
// gets 429 from the console and the API alike.
func TestLoginFailuresAreLimited(t *testing.T) {
	const burst = 3
	n := startNode(t, true, func(c *node.Config) { c.AuthFailureLimit, c.AuthFailureBurst = 0.001, burst })
	csrf, page := loginForm(t, n)
	for i := range burst {
		resp, _ := send(t, n, http.MethodPost, "/console/login", url.Values{"apiKey": {fmt.Sprintf("skq_wrong%d", i)}, "csrf": {csrf.Value}}, page, csrf)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("bad login %d: %d, want 401", i+1, resp.StatusCode)
		}
	}
	// Past the budget even a real key is not looked up: the node has not
	// verified it yet.
	for _, key := range []string{"skq_wrong", n.admin} {
		resp, body := send(t, n, http.MethodPost, "/console/login", url.Values{"apiKey": {key}, "csrf": {csrf.Value}}, page, csrf)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || cookie(resp, "skipq_console") != nil {
			t.Fatalf("login past the budget: %d, Retry-After %q, cookies %v", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Cookies())
		}
		if !strings.Contains(body, "Too many failed logins") {
			t.Fatalf("the page says: %s", body)
		}
	}
	if status, out := n.api(t, "skq_wrong", http.MethodGet, "/v1/queues", nil); status != http.StatusTooManyRequests {
		t.Fatalf("the API after the console's failures: %d %v", status, out)
	}
}

// The console's notices come from the console: a ?flash= (or any other)
// text in the URL never shows as one, nor does a notice cookie the console
// did not sign; the notice an action leaves shows once on the next page.
func TestNoticesComeFromTheServer(t *testing.T) {
	const lure = "Security notice: log in at https://evil.example"
	n := startNode(t, true)
	for _, path := range []string{"/console/login?flash=" + url.QueryEscape(lure), "/console/login?notice=" + url.QueryEscape(lure)} {
		if _, body := send(t, n, http.MethodGet, path, nil, nil); strings.Contains(body, "evil.example") {
			t.Fatalf("%s shows the URL's text", path)
		}
	}
	off := startNode(t, false)
	off.mustAPI(t, "", http.MethodPost, "/v1/queues/q/messages", map[string]any{"body": "x"}, http.StatusCreated)
	if _, body := send(t, off, http.MethodGet, "/console/?flash="+url.QueryEscape(lure), nil, nil); strings.Contains(body, "evil.example") {
		t.Fatal("the queues page shows ?flash=")
	}
	forged := &http.Cookie{Name: "skipq_console_notice", Value: fmt.Sprintf("%d.%s.AAAA", time.Now().Unix(), base64.RawURLEncoding.EncodeToString([]byte(lure)))}
	if _, body := send(t, off, http.MethodGet, "/console/", nil, nil, forged); strings.Contains(body, "evil.example") {
		t.Fatal("the queues page shows an unsigned notice cookie")
	}
	resp, _ := send(t, off, http.MethodPost, "/console/queues/q/purge", url.Values{"confirm": {"q"}},
		map[string]string{"Origin": off.URL, "HX-Request": "true"})
	notice := cookie(resp, "skipq_console_notice")
	if resp.StatusCode != http.StatusSeeOther || notice == nil || strings.Contains(resp.Header.Get("Location"), "?") {
		t.Fatalf("purge: %d to %q, cookies %v", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	resp, body := send(t, off, http.MethodGet, resp.Header.Get("Location"), nil, nil, notice)
	if !strings.Contains(body, `data-testid="flash">Purged 1 messages.<`) {
		t.Fatalf("the page after the purge does not show its notice: %s", body)
	}
	if c := cookie(resp, "skipq_console_notice"); c == nil || c.MaxAge >= 0 {
		t.Fatalf("the notice is not cleared once shown: %v", resp.Cookies())
	}
}

// The console takes a state-changing request only from a page of the
// node's public origins: with auth off, a DNS-rebound name (whose Origin
// matches its own Host) is refused; SKIPQ_PUBLIC_ORIGIN names the origins
// behind a proxy.
func TestConsoleRefusesOtherOrigins(t *testing.T) {
	n := startNode(t, false)
	n.mustAPI(t, "", http.MethodPost, "/v1/queues/q/messages", map[string]any{"body": "x"}, http.StatusCreated)
	port := strings.TrimPrefix(n.URL[strings.LastIndex(n.URL, ":"):], ":")
	purge := url.Values{"confirm": {"q"}}
	for name, headers := range map[string]map[string]string{
		"DNS rebinding": {"Host": "rebind.example:" + port, "Origin": "http://rebind.example:" + port,
			"Sec-Fetch-Site": "same-origin", "HX-Request": "true"},
		"a same-site page": {"Origin": "http://a.localhost:" + port, "Sec-Fetch-Site": "same-site", "HX-Request": "true"},
	} {
		if resp, _ := send(t, n, http.MethodPost, "/console/queues/q/purge", purge, headers); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, resp.StatusCode)
		}
	}
	if s := n.stats(t, "", "q"); s["available"] != 1.0 {
		t.Fatalf("after the refused purges: %v", s)
	}
	if resp, _ := send(t, n, http.MethodPost, "/console/queues/q/purge", purge, map[string]string{"Origin": "http://localhost:" + port, "HX-Request": "true"}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a page of http://localhost:%s: %d, want 303", port, resp.StatusCode)
	}

	p := startNode(t, false, func(c *node.Config) { c.PublicOrigin = "https://queues.example.com" })
	p.mustAPI(t, "", http.MethodPut, "/v1/queues/q", map[string]any{}, http.StatusCreated)
	for origin, want := range map[string]int{p.URL: http.StatusForbidden, "https://queues.example.com": http.StatusSeeOther} {
		if resp, _ := send(t, p, http.MethodPost, "/console/queues/q/purge", purge, map[string]string{"Origin": origin, "HX-Request": "true"}); resp.StatusCode != want {
			t.Errorf("SKIPQ_PUBLIC_ORIGIN=https://queues.example.com, a page of %s: %d, want %d", origin, resp.StatusCode, want)
		}
	}
}

// X-Forwarded-Proto marks the session cookie Secure only when one of
// SKIPQ_TRUSTED_PROXIES sends it: any client can send the header.
func TestForwardedProtoOnlyFromTrustedProxies(t *testing.T) {
	for _, tc := range []struct {
		trusted string
		secure  bool
	}{{"", false}, {"127.0.0.1", true}} {
		n := startNode(t, true, func(c *node.Config) { c.TrustedProxies = tc.trusted })
		csrf, _ := loginForm(t, n)
		origin := n.URL // as the browser sees the node: through the proxy, over https
		if tc.secure {
			origin = "https" + strings.TrimPrefix(n.URL, "http")
		}
		resp, _ := send(t, n, http.MethodPost, "/console/login", url.Values{"apiKey": {n.admin}, "csrf": {csrf.Value}},
			map[string]string{"Origin": origin, "X-Forwarded-Proto": "https"}, csrf)
		session := cookie(resp, "skipq_console")
		if resp.StatusCode != http.StatusSeeOther || session == nil {
			t.Fatalf("trusted proxies %q: login %d %v", tc.trusted, resp.StatusCode, resp.Cookies())
		}
		if session.Secure != tc.secure {
			t.Errorf("trusted proxies %q, X-Forwarded-Proto: https: Secure %v, want %v", tc.trusted, session.Secure, tc.secure)
		}
	}
}
