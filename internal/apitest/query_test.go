package apitest

import (
	"net/http"
	"testing"
)

// Query parameters are strict like body fields (docs/API.md#conventions): one a route
// does not take, or one given twice, is a 400 at the parameter's name, and
// nothing is listed.
func TestUnknownAndRepeatedQueryParametersAreRefused(t *testing.T) {
	n := newNode(t)
	n.send(t, "q", map[string]any{"body": "x"})
	for _, c := range []struct {
		method, path string
		paths        []string
	}{
		{http.MethodGet, "/v1/dlq?queue=x", []string{"queue"}},
		{http.MethodGet, "/v1/queues/q/messages?state=available&state=x", []string{"state"}},
		{http.MethodGet, "/v1/queues?prefix=a&limit=1&limit=2&zzz=1&aaa=2", []string{"aaa", "limit", "zzz"}},
		{http.MethodGet, "/v1/queues/q?stats=false", []string{"stats"}},
		{http.MethodPost, "/v1/queues/q/messages?delaySeconds=5", []string{"delaySeconds"}},
		{http.MethodPost, "/v1/receipts/ack?receiptHandle=x", []string{"receiptHandle"}},
	} {
		var body any
		if c.method == http.MethodPost {
			body = map[string]any{"body": "y"}
		}
		wantError(t, n.do(t, c.method, c.path, body), http.StatusBadRequest, "invalid_request", c.paths...)
	}
	// What each route takes still works, and the refused send stored nothing.
	page := n.must(t, http.StatusOK, http.MethodGet, "/v1/queues/q/messages?state=available&limit=10", nil)
	if got := len(objects(t, page["messages"])); got != 1 {
		t.Fatalf("browse found %d messages, want the 1 sent before", got)
	}
	n.must(t, http.StatusOK, http.MethodGet, "/v1/queues?prefix=q&limit=5", nil)
	n.must(t, http.StatusOK, http.MethodGet, "/v1/dlq?sourceQueue=q", nil)
}
