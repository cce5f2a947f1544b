package apitest

import (
	"net/http"
	"testing"

	"github.com/skipq/skipq/internal/node"
	"github.com/skipq/skipq/internal/testdb"
)

// A worker-only node serves no API, but it can be probed and scraped.
func TestWorkerOnlyNodeAnswersProbes(t *testing.T) {
	n := startNode(t, testdb.New(t), func(c *node.Config) { c.Role = node.RoleWorker })
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if r := n.do(t, "GET", path, nil); r.Status != http.StatusOK {
			t.Fatalf("GET %s on a worker-only node: %d %s", path, r.Status, r.Raw)
		}
	}
	// Not through n.do: the OpenAPI document describes the API nodes.
	resp, err := http.Get(n.URL + "/v1/queues")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /v1/queues on a worker-only node: %d, want 404", resp.StatusCode)
	}
}
