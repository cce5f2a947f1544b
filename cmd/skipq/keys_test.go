package main

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/testdb"
)

// skipq keys create, list and revoke (docs/OPERATIONS.md#api-keys-roles-and-tenants): the database holds only
// a hash of each secret, list shows keys and never secrets, and a revoked
// key gets 401 once the nodes' key cache lets it go (within
// auth.KeyCacheTTL, as docs/OPERATIONS.md tells operators).
func TestKeysListAndRevoke(t *testing.T) {
	db := testdb.New(t)
	p := serve(t, db, "SKIPQ_AUTH=required")
	c := newCLI(t, p, "SKIPQ_DATABASE_URL="+db)
	var created struct {
		ID     int64
		Secret string
	}
	c.okJSON(&created, "keys", "create", "--tenant", "acme", "--role", "read", "--name", "reader", "--json")
	other := strings.TrimSpace(c.ok("keys", "create", "--tenant", "globex", "--role", "admin", "--name", "other"))

	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, secret := range []string{created.Secret, other} {
		var rows, plain, hashed int
		if err := conn.QueryRow(context.Background(), `SELECT count(*),
			count(*) FILTER (WHERE strpos(k::text, $1) > 0 OR position(convert_to($1, 'UTF8') IN k.secret_hash) > 0),
			count(*) FILTER (WHERE k.secret_hash = sha256(convert_to($1, 'UTF8')))
			FROM skipq.api_keys k`, secret).Scan(&rows, &plain, &hashed); err != nil {
			t.Fatal(err)
		}
		if rows != 2 || plain != 0 || hashed != 1 {
			t.Fatalf("of %d stored keys, %d hold the secret in plain and %d its SHA-256; want 0 and 1", rows, plain, hashed)
		}
	}

	var list struct {
		Keys []struct {
			ID                   int64
			Tenant, Role, Name   string
			CreatedAt, RevokedAt *string
		}
	}
	out := c.okJSON(&list, "keys", "list", "--json")
	if len(list.Keys) != 2 || list.Keys[0].ID != created.ID || list.Keys[0].Tenant != "acme" || list.Keys[0].Role != "read" ||
		list.Keys[0].Name != "reader" || list.Keys[0].CreatedAt == nil || list.Keys[0].RevokedAt != nil || list.Keys[1].Name != "other" {
		t.Fatalf("keys list --json: %s", out)
	}
	text := c.ok("keys", "list")
	if !regexp.MustCompile(fmt.Sprintf(`(?m)^ID +TENANT +ROLE +NAME +CREATED +REVOKED +SQS_ACCESS_KEY_ID\n%d +acme +read +reader +\S+ +- +-$`, created.ID)).MatchString(text) {
		t.Fatalf("keys list printed\n%s", text)
	}
	for _, s := range []string{out, text} {
		if strings.Contains(s, created.Secret) || strings.Contains(s, other) {
			t.Fatalf("keys list shows a secret:\n%s", s)
		}
	}

	get := func(secret string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+p.addr+"/v1/queues", nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := get(created.Secret); s != http.StatusOK {
		t.Fatalf("the new key: %d", s)
	}
	if got, want := c.ok("keys", "revoke", fmt.Sprint(created.ID)), fmt.Sprintf("revoked key %d (reader)\n", created.ID); got != want {
		t.Fatalf("keys revoke printed %q, want %q", got, want)
	}
	c.okJSON(&list, "keys", "list", "--json")
	if list.Keys[0].RevokedAt == nil || list.Keys[1].RevokedAt != nil {
		t.Fatalf("keys list after revoking %d: %+v", created.ID, list.Keys)
	}
	await(t, 3*auth.KeyCacheTTL, "the revocation to reach the node", func() bool {
		return get(created.Secret) == http.StatusUnauthorized
	})
	if s := get(other); s != http.StatusOK {
		t.Fatalf("revoking one key turned another away: %d", s)
	}
	if got := c.fails(1, "keys", "revoke", "999999"); !strings.Contains(got, "999999") {
		t.Fatalf("revoking a missing key: stderr %q", got)
	}
	c.fails(2, "keys", "revoke", "abc")
}

// skipq keys sqs-credentials (docs/SQS.md#authentication-and-roles): needs the master key, prints
// the two variables, can be re-run (same id, same re-derived secret), and
// keys list shows the access key id; the secret is nowhere in the database.
func TestKeysSQSCredentials(t *testing.T) {
	db := testdb.New(t)
	p := serve(t, db)
	master := "SKIPQ_SIGV4_MASTER_KEY=MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	c := newCLI(t, p, "SKIPQ_DATABASE_URL="+db, master)
	var created struct{ ID int64 }
	c.okJSON(&created, "keys", "create", "--tenant", "acme", "--role", "write", "--name", "sqs", "--json")
	out := c.ok("keys", "sqs-credentials", fmt.Sprint(created.ID))
	m := regexp.MustCompile(`^AWS_ACCESS_KEY_ID=(SKQ[A-Z2-7]{17})\nAWS_SECRET_ACCESS_KEY=([A-Za-z0-9_-]{40})\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("sqs-credentials printed %q", out)
	}
	if again := c.ok("keys", "sqs-credentials", fmt.Sprint(created.ID)); again != out {
		t.Fatalf("a second run printed %q, want %q", again, out)
	}
	if list := c.ok("keys", "list"); !strings.Contains(list, m[1]) || strings.Contains(list, m[2]) {
		t.Fatalf("keys list:\n%s", list)
	}
	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM skipq.sqs_credentials c
		WHERE strpos(c::text, $1) > 0`, m[2]).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the secret is stored (%d rows, %v)", n, err)
	}
	noKey := newCLI(t, p, "SKIPQ_DATABASE_URL="+db, "SKIPQ_SIGV4_MASTER_KEY=")
	if got := noKey.fails(1, "keys", "sqs-credentials", fmt.Sprint(created.ID)); !strings.Contains(got, "SKIPQ_SIGV4_MASTER_KEY") {
		t.Fatalf("without the master key: %s", got)
	}
}
