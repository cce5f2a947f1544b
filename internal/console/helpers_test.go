package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/node"
	"github.com/skipq/skipq/internal/node/nodetest"
	"github.com/skipq/skipq/internal/testdb"
)

// testNode is a node on a fresh database, with API keys when auth is on.
type testNode struct {
	URL                string
	pool               *pgxpool.Pool
	keys               *auth.Keys
	admin, write, read string
}

// startNode runs a node on a loopback port of the console's range.
func startNode(t *testing.T, authOn bool, configure ...func(*node.Config)) *testNode {
	t.Helper()
	dbURL := testdb.New(t)
	n := &testNode{}
	cfg := append([]func(*node.Config){func(c *node.Config) {
		c.ListenAddr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		if authOn {
			c.Auth = "required"
		}
	}}, configure...)
	n.URL = nodetest.Start(t, dbURL, cfg...)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	n.pool = pool
	n.keys = auth.New(pool, 0)
	if authOn {
		n.admin = n.key(t, "default", "admin")
		n.write = n.key(t, "default", "write")
		n.read = n.key(t, "default", "read")
	}
	return n
}

func (n *testNode) key(t *testing.T, tenant, role string) string {
	t.Helper()
	_, secret, err := n.keys.Create(context.Background(), tenant, role, role+" key")
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// api calls the HTTP API with a key ("" with auth off) and decodes the
// answer into a map.
func (n *testNode) api(t *testing.T, key, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, n.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, raw := roundTrip(t, http.DefaultClient, req)
	out := map[string]any{}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &out)
	}
	return resp.StatusCode, out
}

// roundTrip sends req with client and reads the whole answer.
func roundTrip(t *testing.T, client *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, raw
}

// send makes a console request without following redirects and returns
// the response with its body read.
func send(t *testing.T, n *testNode, method, path string, form url.Values, headers map[string]string, cookies ...*http.Cookie) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, n.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, raw := roundTrip(t, noRedirects, req)
	return resp, string(raw)
}

// cookie is the cookie name a response sets, or nil.
func cookie(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// mustAPI is api that fails the test on an unexpected status.
func (n *testNode) mustAPI(t *testing.T, key, method, path string, body any, want int) map[string]any {
	t.Helper()
	status, out := n.api(t, key, method, path, body)
	if status != want {
		t.Fatalf("%s %s: %d %v, want %d", method, path, status, out, want)
	}
	return out
}

// stats are a queue's exact counts through the API.
func (n *testNode) stats(t *testing.T, key, queue string) map[string]any {
	t.Helper()
	return n.mustAPI(t, key, http.MethodGet, "/v1/queues/"+queue, nil, http.StatusOK)["stats"].(map[string]any)
}

// noRedirects is an HTTP client that shows redirects instead of following.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// seedHistory writes an hour of depth history (one snapshot a minute) for
// queue, as the worker would have recorded it.
func (n *testNode) seedHistory(t *testing.T, queue string) {
	t.Helper()
	_, err := n.pool.Exec(context.Background(), `
		WITH q AS (SELECT id, tenant FROM skipq.queues WHERE name = $1),
		pts AS (SELECT date_trunc('minute', now()) - make_interval(mins => 60 - i) AS at, i FROM generate_series(1, 59) i),
		snaps AS (INSERT INTO skipq.depth_snapshots (at) SELECT at FROM pts)
		INSERT INTO skipq.depth_history (queue_id, tenant, at, available, delayed, in_flight, dead_lettered)
		SELECT q.id, q.tenant, pts.at, (40 + 30 * sin(pts.i / 8.0))::bigint, 0, (10 + 8 * cos(pts.i / 5.0))::bigint, pts.i / 12
		FROM q, pts`, queue)
	if err != nil {
		t.Fatal(err)
	}
}
