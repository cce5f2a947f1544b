package console_test

import (
	"net/http"
	"strings"
	"testing"
)

// The Topics page lists topics; a topic's page shows its groups with their
// filters and depths, and a message's state in each group.
func TestTopicPages(t *testing.T) {
	n := startNode(t, false)
	n.mustAPI(t, "", http.MethodPut, "/v1/topics/orders", map[string]any{"retainSeconds": 600}, http.StatusCreated)
	n.mustAPI(t, "", http.MethodPut, "/v1/topics/orders/subscriptions/billing", nil, http.StatusCreated)
	n.mustAPI(t, "", http.MethodPut, "/v1/topics/orders/subscriptions/eu",
		map[string]any{"filter": map[string]any{"tags": map[string]any{"region": []string{"eu", "uk"}}}}, http.StatusCreated)
	n.mustAPI(t, "", http.MethodPost, "/v1/topics/orders/messages", map[string]any{"body": "x", "messageId": "m1"}, http.StatusCreated)

	resp, page := send(t, n, http.MethodGet, "/console/topics", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `data-topic="orders"`) {
		t.Fatalf("topics page: %d\n%s", resp.StatusCode, page)
	}
	resp, page = send(t, n, http.MethodGet, "/console/topics/orders?messageId=m1", nil, nil)
	for _, want := range []string{`data-testid="group-row" data-queue="billing"`, "region=eu,uk", "every message",
		"retains published messages 600s for replays",
		`data-queue="billing" data-state="available"`, `data-queue="eu" data-state="gone"`} {
		if !strings.Contains(page, want) {
			t.Errorf("topic page lacks %q:\n%s", want, page)
		}
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("topic page: %d", resp.StatusCode)
	}
	if resp, _ := send(t, n, http.MethodGet, "/console/topics/missing", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a missing topic's page: %d, want 404", resp.StatusCode)
	}
}
