package apitest

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/skipq/skipq/node"
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
