package apitest

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/node"
)

// keys creates API keys in the node's database and returns their secrets.
func createKey(t *testing.T, pool *pgxpool.Pool, tenant, role string) (auth.Key, string) {
	t.Helper()
	key, secret, err := auth.New(pool, 0).Create(context.Background(), tenant, role, role+"-key")
	if err != nil {
		t.Fatal(err)
	}
	return key, secret
}

func newPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// resetAcme gives tenant acme a queue "jobs" holding message m1 and a
// dead-lettered message dl1, whatever the previous check did to them.
func resetAcme(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		DELETE FROM skipq.messages; DELETE FROM skipq.dedup_keys; DELETE FROM skipq.queues;
		INSERT INTO skipq.queues (tenant, name) VALUES ('acme', 'jobs');
		SELECT skipq.send('jobs', 'work', message_id => 'm1', tenant => 'acme');
		SELECT skipq.send('jobs', 'dead', message_id => 'dl1', tenant => 'acme');
		UPDATE skipq.messages SET dead_lettered_at = now(), re_routed_from = 'jobs.src' WHERE message_id = 'dl1';`)
	if err != nil {
		t.Fatal(err)
	}
}

// acmeState is every row of tenant acme's queues and their messages, as
// text: what another tenant's calls must leave exactly as it was.
func acmeState(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var state string
	err := pool.QueryRow(context.Background(), `
		SELECT coalesce(string_agg(q::text || ' ' || coalesce(m::text, '-'), E'\n' ORDER BY q.name, m.sequence), '')
		FROM skipq.queues q LEFT JOIN skipq.messages m ON m.queue_id = q.id
		WHERE q.tenant = 'acme'`).Scan(&state)
	if err != nil {
		t.Fatal(err)
	}
	return state
}

func TestAuthMatrix(t *testing.T) {
	n := newNode(t, func(c *node.Config) { c.Auth = "required" })
	pool := newPool(t, n.DB)
	_, readKey := createKey(t, pool, "acme", "read")
	_, writeKey := createKey(t, pool, "acme", "write")
	_, adminKey := createKey(t, pool, "acme", "admin")
	_, otherAdmin := createKey(t, pool, "globex", "admin")
	revoked, revokedKey := createKey(t, pool, "acme", "admin")
	if _, err := auth.New(pool, 0).Revoke(context.Background(), revoked.ID); err != nil {
		t.Fatal(err)
	}

	type route struct {
		method, path string
		body         any
		need         string // weakest role allowed: read, write, admin; "" = open
		ok           int    // status for an allowed caller of acme
		other        int    // status for another tenant's admin
	}
	routes := []route{
		{"GET", "/v1/queues", nil, "read", 200, 200},
		{"PUT", "/v1/queues/jobs", map[string]any{}, "admin", 200, 201},
		{"GET", "/v1/queues/jobs", nil, "read", 200, 404},
		{"DELETE", "/v1/queues/jobs", nil, "admin", 204, 404},
		{"POST", "/v1/queues/jobs/purge", nil, "write", 200, 404},
		{"POST", "/v1/queues/jobs/messages", map[string]any{"body": "x"}, "write", 201, 201},
		{"POST", "/v1/queues/jobs/messages/batch", map[string]any{"messages": []any{map[string]any{"body": "x"}}}, "write", 201, 201},
		{"POST", "/v1/queues/jobs/messages/receive", map[string]any{"waitSeconds": 0}, "write", 200, 200},
		{"POST", "/v1/queues/jobs/messages/receive", map[string]any{"waitSeconds": 0, "isPeek": true}, "read", 200, 200},
		{"GET", "/v1/queues/jobs/messages", nil, "read", 200, 404},
		{"GET", "/v1/queues/jobs/messages/m1", nil, "read", 200, 404},
		{"DELETE", "/v1/queues/jobs/messages/m1", nil, "write", 204, 404},
		{"POST", "/v1/queues/jobs/messages/dl1/redrive", nil, "write", 200, 404},
		{"POST", "/v1/queues/jobs/redrive", nil, "write", 200, 404},
		{"GET", "/v1/dlq", nil, "read", 200, 200},
		{"GET", "/v1/messages", nil, "read", 200, 200},
		{"GET", "/v1/openapi.json", nil, "read", 200, 200},
		{"POST", "/v1/receipts/ack", map[string]any{"receiptHandle": "stale"}, "", 404, 404},
		{"POST", "/v1/receipts/nack", map[string]any{"receiptHandle": "stale"}, "", 404, 404},
		{"POST", "/v1/receipts/visibility", map[string]any{"receiptHandle": "stale", "visibilitySeconds": 1}, "", 404, 404},
		{"POST", "/v1/receipts/requeue", map[string]any{"receiptHandle": "stale", "queue": "x"}, "", 404, 404},
		{"GET", "/healthz", nil, "", 200, 200},
		{"GET", "/readyz", nil, "", 200, 200},
		{"GET", "/metrics", nil, "", 200, 200},
	}
	callers := []struct {
		name, secret string
		rank         int
		other        bool
	}{
		{"no key", "", 0, false},
		{"bad key", "skq_not-a-real-key", 0, false},
		{"revoked key", revokedKey, 0, false},
		{"read", readKey, 1, false},
		{"write", writeKey, 2, false},
		{"admin", adminKey, 3, false},
		{"other tenant's admin", otherAdmin, 3, true},
	}
	for _, r := range routes {
		for _, c := range callers {
			t.Run(fmt.Sprintf("%s %s %v as %s", r.method, r.path, r.body, c.name), func(t *testing.T) {
				resetAcme(t, pool)
				before := acmeState(t, pool)
				var headers []string
				if c.secret != "" {
					headers = []string{"Authorization", "Bearer " + c.secret}
				}
				resp := n.do(t, r.method, r.path, r.body, headers...)
				switch {
				case r.need == "":
					if resp.Status != r.ok {
						t.Fatalf("status %d, want %d: %s", resp.Status, r.ok, resp.Raw)
					}
				case c.rank == 0:
					wantError(t, resp, http.StatusUnauthorized, "unauthenticated")
				case c.rank < auth.RoleRank(r.need):
					wantError(t, resp, http.StatusForbidden, "access_denied")
				case c.other:
					if resp.Status != r.other {
						t.Fatalf("status %d, want %d: %s", resp.Status, r.other, resp.Raw)
					}
					if resp.Status == 404 {
						wantError(t, resp, 404, "not_found")
					}
					if msgs, ok := resp.Body["messages"]; ok && len(objects(t, msgs)) != 0 {
						t.Fatalf("another tenant's caller saw messages: %s", resp.Raw)
					}
					if qs, ok := resp.Body["queues"]; ok && len(objects(t, qs)) != 0 {
						t.Fatalf("another tenant's caller saw queues: %s", resp.Raw)
					}
					if after := acmeState(t, pool); after != before {
						t.Fatalf("another tenant's call changed acme's queues and messages:\nbefore:\n%s\nafter:\n%s", before, after)
					}
				default:
					if resp.Status != r.ok {
						t.Fatalf("status %d, want %d: %s", resp.Status, r.ok, resp.Raw)
					}
				}
			})
		}
	}
}

func TestRevocationTakesEffect(t *testing.T) {
	n := newNode(t, func(c *node.Config) { c.Auth = "required" })
	pool := newPool(t, n.DB)
	key, secret := createKey(t, pool, "acme", "read")
	bearer := []string{"Authorization", "Bearer " + secret}
	if r := n.do(t, "GET", "/v1/queues", nil, bearer...); r.Status != 200 {
		t.Fatalf("fresh key: %d %s", r.Status, r.Raw)
	}
	if _, err := auth.New(pool, 0).Revoke(context.Background(), key.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*auth.KeyCacheTTL, "the revocation to reach the node", func() bool {
		return n.do(t, "GET", "/v1/queues", nil, bearer...).Status == http.StatusUnauthorized
	})
}

// The auth scheme is case-insensitive (RFC 7235 §2.1): a client that sends
// "bearer" is no less authenticated than one that sends "Bearer".
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	n := newNode(t, func(c *node.Config) { c.Auth = "required" })
	_, secret := createKey(t, newPool(t, n.DB), "acme", "read")
	for _, header := range []string{"Bearer " + secret, "bearer " + secret, "BEARER " + secret, "bEaReR   " + secret} {
		if r := n.do(t, "GET", "/v1/queues", nil, "Authorization", header); r.Status != http.StatusOK {
			t.Errorf("Authorization: %q: status %d, want 200: %s", header[:len(header)-len(secret)], r.Status, r.Raw)
		}
	}
	for _, header := range []string{"Basic " + secret, "Bearer" + secret, "Bearer ", secret} {
		wantError(t, n.do(t, "GET", "/v1/queues", nil, "Authorization", header), http.StatusUnauthorized, "unauthenticated")
	}
}
