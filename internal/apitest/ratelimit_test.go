package apitest

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/skipq/skipq/internal/node"
)

func TestRateLimit(t *testing.T) {
	n := newNode(t, func(c *node.Config) {
		c.RateLimit = 0.5 // one token every 2 s: the bucket cannot refill mid-test
		c.RateBurst = 3
	})
	for i := range 3 {
		if r := n.do(t, "GET", "/v1/queues", nil); r.Status != http.StatusOK {
			t.Fatalf("request %d within the burst: %d %s", i, r.Status, r.Raw)
		}
	}
	r := n.do(t, "GET", "/v1/queues", nil)
	wantError(t, r, http.StatusTooManyRequests, "too_many_requests")
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	// Service routes are never limited.
	if r := n.do(t, "GET", "/healthz", nil); r.Status != http.StatusOK {
		t.Fatalf("healthz: %d", r.Status)
	}
}

// Failed authentications are limited per client IP ahead of the key lookup
// (issue #18): past the budget an address gets 429 with Retry-After for any
// key the node has not verified already, so a flood of made-up keys costs
// the database nothing, while a key the node trusts keeps working from the
// same address. X-Forwarded-For counts only from a trusted proxy.
func TestFailedAuthenticationsAreLimitedPerIP(t *testing.T) {
	limited := func(c *node.Config) {
		c.Auth = "required"
		c.AuthFailureLimit = 0.5 // one token every 2 s: no refill mid-test
		c.AuthFailureBurst = 3
	}
	n := newNode(t, limited)
	pool := newPool(t, n.DB)
	_, good := createKey(t, pool, "acme", "write")
	_, unused := createKey(t, pool, "acme", "write")
	bearer := func(secret string) []string { return []string{"Authorization", "Bearer " + secret} }
	if r := n.do(t, "GET", "/v1/queues", nil, bearer(good)...); r.Status != http.StatusOK {
		t.Fatalf("good key: %d %s", r.Status, r.Raw)
	}
	for i := range 3 {
		r := n.do(t, "GET", "/v1/queues", nil, bearer("skq_madeup"+strconv.Itoa(i))...)
		wantError(t, r, http.StatusUnauthorized, "unauthenticated")
	}
	for _, h := range [][]string{
		bearer("skq_madeup-after"),
		bearer(unused), // valid, but the node would have to ask the database
		append(bearer("skq_madeup-forwarded"), "X-Forwarded-For", "10.1.2.3"),
	} {
		r := n.do(t, "GET", "/v1/queues", nil, h...)
		wantError(t, r, http.StatusTooManyRequests, "too_many_requests")
		if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 {
			t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
		}
	}
	if r := n.do(t, "GET", "/v1/queues", nil, bearer(good)...); r.Status != http.StatusOK {
		t.Fatalf("a verified key from the limited address: %d %s", r.Status, r.Raw)
	}

	// Behind a trusted proxy each forwarded client has its own budget.
	p := startNode(t, n.DB, limited, func(c *node.Config) { c.TrustedProxies = "127.0.0.1/32" })
	for range 3 {
		r := p.do(t, "GET", "/v1/queues", nil, append(bearer("skq_madeup"), "X-Forwarded-For", "10.1.2.3")...)
		wantError(t, r, http.StatusUnauthorized, "unauthenticated")
	}
	wantError(t, p.do(t, "GET", "/v1/queues", nil, append(bearer("skq_madeup"), "X-Forwarded-For", "10.1.2.3")...),
		http.StatusTooManyRequests, "too_many_requests")
	wantError(t, p.do(t, "GET", "/v1/queues", nil, append(bearer("skq_madeup"), "X-Forwarded-For", "10.1.2.4")...),
		http.StatusUnauthorized, "unauthenticated")
}
