package apitest

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skipq/skipq/internal/node"
	"github.com/skipq/skipq/internal/testdb"
)

// The SQL API's privilege boundary (docs/SQL.md), attacked as a real login role
// would: SET ROLE from a superuser session (TestSQLProducerRoleMaySend...)
// keeps the superuser's session and cannot show what a separate login can do.

// loginRole creates a LOGIN role, member of the given roles, for this test
// and returns a URL of dbURL's database as that role. Role names are
// cluster-wide, so each is unique; t.Cleanup drops it, after DROP OWNED in
// this database so its grants and objects do not keep it alive (the test
// database itself is dropped later: cleanups run last-registered first).
func loginRole(t *testing.T, dbURL string, memberOf ...string) (name, roleURL string) {
	t.Helper()
	ctx := context.Background()
	admin := connect(t, dbURL)
	name = "sqlsec_" + strings.ToLower(rand.Text()[:12])
	// A password too, in case SKIPQ_TEST_DATABASE_URL's server does not
	// trust local connections.
	password := rand.Text()
	_, err := admin.Exec(ctx, "CREATE ROLE "+ident(name)+" LOGIN PASSWORD '"+password+"'")
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		t.Skipf("the test server's user may not create roles: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// admin is still open: its own cleanup was registered before this one.
		if _, err := admin.Exec(ctx, "DROP OWNED BY "+ident(name)); err != nil {
			t.Errorf("drop owned by %s: %v", name, err)
		}
		if _, err := admin.Exec(ctx, "DROP ROLE "+ident(name)); err != nil {
			t.Errorf("drop role %s: %v", name, err)
		}
	})
	for _, r := range memberOf {
		if _, err := admin.Exec(ctx, "GRANT "+ident(r)+" TO "+ident(name)); err != nil {
			t.Fatal(err)
		}
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(name, password)
	return name, u.String()
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// wantSQLState fails unless err is a PostgreSQL error with that SQLSTATE.
func wantSQLState(t *testing.T, what string, err error, code string) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != code {
		t.Errorf("%s: got %v, want SQLSTATE %s", what, err, code)
	}
}

// Limits used to come from current_setting('skipq.max_*'), which any
// session may SET: a producer raised its own limits and stored a message
// 50 times the largest allowed.
func TestSQLLimitsIgnoreSettingsTheCallerCanChange(t *testing.T) {
	n := newNode(t)
	_, producerURL := loginRole(t, n.DB, "skipq_producer")
	producer := connect(t, producerURL)
	ctx := context.Background()
	for _, stmt := range []string{
		"SET skipq.max_message_bytes = '200000000'",
		"SET skipq.max_delay_seconds = '999999999'",
		"SET skipq.max_expiration_seconds = '999999999'",
		"SET skipq.max_receive_count = '999999999'",
	} {
		if _, err := producer.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	// Each one past its default limit (docs/API.md#limits) (the node runs with the defaults).
	for _, stmt := range []string{
		"SELECT skipq.send('q', repeat('A', 1048577))",
		"SELECT skipq.send_batch('q', ARRAY[repeat('A', 1048577)])",
		"SELECT skipq.send('q', 'x', delay_seconds => 43201)",
		"SELECT skipq.send('q', 'x', expiration_seconds => 1209601)",
		"SELECT skipq.send('q', 'x', max_receive_count => 1025)",
	} {
		_, err := producer.Exec(ctx, stmt)
		wantSQLState(t, stmt+" after raising the skipq.max_* settings", err, "22023")
	}
	// The limits themselves are out of the producer's reach.
	_, err := producer.Exec(ctx, "UPDATE skipq.sql_limits SET value = 200000000")
	wantSQLState(t, "a producer's UPDATE of skipq.sql_limits", err, "42501")
	// The 14-day expiration limit (docs/API.md#limits) is accepted.
	if _, err := producer.Exec(ctx, "SELECT skipq.send('q', 'x', expiration_seconds => 1209600)"); err != nil {
		t.Fatalf("expiration of 14 days: %v", err)
	}
}

// send and send_batch ran with the caller's rights and search_path and
// called convert_to unqualified: a public.convert_to(text, text) planted by
// a role with CREATE on public (an exact match, so it beat pg_catalog's
// (text, name)) ran as whoever sent next.
func TestSQLSendIgnoresFunctionsPlantedInTheCallersSearchPath(t *testing.T) {
	n := newNode(t)
	ctx := context.Background()
	admin := connect(t, n.DB)
	attacker, attackerURL := loginRole(t, n.DB)
	_, victimURL := loginRole(t, n.DB, "skipq_producer")
	if _, err := admin.Exec(ctx, "GRANT CREATE ON SCHEMA public TO "+ident(attacker)); err != nil {
		t.Fatal(err)
	}
	planter := connect(t, attackerURL)
	for _, stmt := range []string{
		// What the planted function did, and as whom.
		"CREATE TABLE public.hijacked (who text, via text)",
		"GRANT INSERT ON public.hijacked TO PUBLIC",
		`CREATE FUNCTION public.convert_to(s text, enc text) RETURNS bytea LANGUAGE plpgsql AS $$
		 BEGIN
		     INSERT INTO public.hijacked VALUES (current_user, 'convert_to');
		     RETURN pg_catalog.convert_to(s, enc::name);
		 END $$`,
		// An operator too, a better match than pg_catalog's numeric *
		// numeric for uuid_v7's "extract(...) * 1000": only the pinned
		// search_path keeps these out, qualified calls do not.
		`CREATE FUNCTION public.hijack_times(a numeric, b integer) RETURNS numeric LANGUAGE plpgsql AS $$
		 BEGIN
		     INSERT INTO public.hijacked VALUES (current_user, '*');
		     RETURN pg_catalog.numeric_mul(a, b::numeric);
		 END $$`,
		"CREATE OPERATOR public.* (LEFTARG = numeric, RIGHTARG = integer, FUNCTION = public.hijack_times)",
	} {
		if _, err := planter.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	victim := connect(t, victimURL)
	var path string
	if err := victim.QueryRow(ctx, "SHOW search_path").Scan(&path); err != nil || !strings.Contains(path, "public") {
		t.Fatalf("the victim's search_path %q (%v) must include public for this test to mean anything", path, err)
	}
	for _, stmt := range []string{
		"SELECT skipq.send('planted', 'text')",
		`SELECT skipq.send('planted', '{"json":1}'::jsonb, message_id => 'with-id', tags => '{"k":"v"}')`,
		`SELECT skipq.send('planted', '\x00ff'::bytea)`,
		"SELECT skipq.send_batch('planted', ARRAY['b1', 'b2'])",
		`SELECT skipq.send_batch('planted', ARRAY['{"b":3}'::jsonb])`,
		`SELECT skipq.send_batch('planted', ARRAY['\x01'::bytea])`,
	} {
		if _, err := victim.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	// The nodes call uuid_v7 in their own queries (moves whose id is taken),
	// with their own search_path; this session stands in for one.
	if _, err := admin.Exec(ctx, "SELECT skipq.uuid_v7()"); err != nil {
		t.Fatal(err)
	}
	rows, err := admin.Query(ctx, "SELECT who || ' via ' || via FROM public.hijacked")
	if err != nil {
		t.Fatal(err)
	}
	ran, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(ran) > 0 {
		t.Fatalf("skipq functions ran the attacker's (as whom, via what): %v", ran)
	}
	// And the messages are intact.
	msgs := n.receive(t, "planted", map[string]any{"maxMessages": 10})
	var bodies []string
	for _, m := range msgs {
		bodies = append(bodies, m["body"].(string))
	}
	want := []string{"text", `{"json": 1}`, "AP8=", "b1", "b2", `{"b": 3}`, "AQ=="}
	if !slices.Equal(bodies, want) {
		t.Fatalf("bodies %q, want %q", bodies, want)
	}
}

// skipq_producer (docs/SQL.md) may execute send and send_batch (and, with
// topics, publish) and nothing else in the schema; it used to be able to call
// skipq.enqueue directly.
func TestSQLProducerMayExecuteOnlySendSendBatchAndPublish(t *testing.T) {
	n := newNode(t)
	ctx := context.Background()
	admin := connect(t, n.DB)
	producer, producerURL := loginRole(t, n.DB, "skipq_producer")

	_, err := connect(t, producerURL).Exec(ctx, `SELECT * FROM skipq.enqueue('q', ARRAY['\x01'::bytea], true, '', '{}',
		NULL, NULL, NULL, NULL, NULL, '', 'default', NULL)`)
	wantSQLState(t, "a producer calling skipq.enqueue", err, "42501")

	executable := executableBy(t, admin, producer)
	want := []string{
		"skipq.publish(text,bytea,text,jsonb,integer,integer,integer,text,text,text,text,text)",
		"skipq.publish(text,jsonb,text,jsonb,integer,integer,integer,text,text,text,text,text)",
		"skipq.publish(text,text,text,jsonb,integer,integer,integer,text,text,text,text,text)",
		"skipq.send(text,bytea,text,jsonb,integer,integer,integer,text,text,text,text,text)",
		"skipq.send(text,jsonb,text,jsonb,integer,integer,integer,text,text,text,text,text)",
		"skipq.send(text,text,text,jsonb,integer,integer,integer,text,text,text,text,text)",
		"skipq.send_batch(text,bytea[],text,jsonb,integer,integer,integer,text,text[],text,text,text[])",
		"skipq.send_batch(text,jsonb[],text,jsonb,integer,integer,integer,text,text[],text,text,text[])",
		"skipq.send_batch(text,text[],text,jsonb,integer,integer,integer,text,text[],text,text,text[])",
	}
	if !slices.Equal(executable, want) {
		t.Errorf("a skipq_producer may execute\n  %s\nwant exactly\n  %s", strings.Join(executable, "\n  "), strings.Join(want, "\n  "))
	}

	// PUBLIC executes no skipq function: a migration that creates one must
	// end with REVOKE ALL ON ALL FUNCTIONS IN SCHEMA skipq FROM PUBLIC
	// (a NULL proacl is the default, which grants PUBLIC).
	rows, err := admin.Query(ctx, `SELECT p.oid::regprocedure::text FROM pg_proc p
		CROSS JOIN LATERAL aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
		WHERE p.pronamespace = 'skipq'::regnamespace AND a.grantee = 0 ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	public, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(public) > 0 {
		t.Errorf("PUBLIC may execute %v", public)
	}

	// Nor any table or sequence (the limits included).
	rows, err = admin.Query(ctx, `SELECT c.oid::regclass::text FROM pg_class c
		WHERE c.relnamespace = 'skipq'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
		  AND (has_table_privilege($1, c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
		       OR (c.relkind = 'S' AND has_sequence_privilege($1, c.oid, 'USAGE, SELECT, UPDATE')))
		ORDER BY 1`, producer)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) > 0 {
		t.Errorf("a skipq_producer has privileges on %v", tables)
	}
}

// executableBy lists the skipq functions role may execute.
// has_function_privilege counts membership and PUBLIC's grants, so this
// also catches a future function created without revoking PUBLIC.
func executableBy(t *testing.T, admin *pgx.Conn, role string) []string {
	t.Helper()
	rows, err := admin.Query(context.Background(), `SELECT p.oid::regprocedure::text FROM pg_proc p
		WHERE p.pronamespace = 'skipq'::regnamespace AND has_function_privilege($1, p.oid, 'EXECUTE')
		ORDER BY 1`, role)
	if err != nil {
		t.Fatal(err)
	}
	executable, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return executable
}

// Every skipq function runs with search_path pinned, whoever calls it: the
// producer through send, the nodes' queries through uuid_v7. Except the
// expressions written once as IMMUTABLE or STABLE SQL functions for the
// planner to inline (skipq.message_state, skipq.failure_doc): a SET clause
// would stop the inlining, and they run with their caller's rights, so a
// search_path can only mislead its own session.
func TestSQLEveryFunctionPinsItsSearchPath(t *testing.T) {
	admin := connect(t, testdb.New(t))
	rows, err := admin.Query(context.Background(), `SELECT p.oid::regprocedure::text FROM pg_proc p
		WHERE p.pronamespace = 'skipq'::regnamespace
		  AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false)
		  AND NOT (p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'sql')
		           AND p.provolatile IN ('i', 's') AND NOT p.prosecdef)
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	unpinned, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(unpinned) > 0 {
		t.Fatalf("without SET search_path = pg_catalog, pg_temp: %v", unpinned)
	}
}

// A node writes its limits for the SQL API at start, so SQL refuses what
// HTTP refuses.
func TestSQLSendEnforcesTheNodesLimits(t *testing.T) {
	n := newNode(t, func(c *node.Config) {
		c.Limits.MaxMessageBytes = 1000
		c.Limits.MaxDelaySeconds = 60
		c.Limits.MaxExpirationSeconds = 120
		c.Limits.MaxReceiveCount = 5
	})
	_, producerURL := loginRole(t, n.DB, "skipq_producer")
	producer := connect(t, producerURL)
	ctx := context.Background()
	if _, err := producer.Exec(ctx, `SELECT skipq.send('q', repeat('A', 1000), delay_seconds => 60,
		expiration_seconds => 120, max_receive_count => 5)`); err != nil {
		t.Fatalf("a send at the node's limits: %v", err)
	}
	for _, stmt := range []string{
		"SELECT skipq.send('q', repeat('A', 1001))",
		"SELECT skipq.send('q', repeat('A', 1000), metadata => 'm')",
		"SELECT skipq.send('q', 'x', delay_seconds => 61)",
		"SELECT skipq.send('q', 'x', expiration_seconds => 121)",
		"SELECT skipq.send('q', 'x', max_receive_count => 6)",
	} {
		_, err := producer.Exec(ctx, stmt)
		wantSQLState(t, stmt, err, "22023")
	}
	// The same bound over HTTP.
	wantError(t, n.do(t, "POST", "/v1/queues/q/messages", map[string]any{"body": strings.Repeat("A", 1001)}),
		http.StatusRequestEntityTooLarge, "payload_too_large")
}

// A node whose database role may not write skipq.sql_limits is misconfigured
// for the SQL API, not broken: it starts and serves HTTP, and skipq.send
// keeps the limits already in the table.
func TestNodeThatCannotWriteTheSQLLimitsStillStarts(t *testing.T) {
	if os.Getenv("SKIPQ_TEST_PGBOUNCER") == "1" {
		// The node logs in as a role of its own; the tests' PgBouncer lets
		// only the server's user in (devpg.PgBouncer.Through).
		t.Skip("needs the node to log in as another role than PgBouncer admits")
	}
	dbURL := testdb.New(t)
	ctx := context.Background()
	admin := connect(t, dbURL)
	nodeRole, nodeURL := loginRole(t, dbURL)
	for _, stmt := range []string{
		"GRANT USAGE ON SCHEMA skipq TO " + ident(nodeRole),
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA skipq TO " + ident(nodeRole),
		"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA skipq TO " + ident(nodeRole),
		"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA skipq TO " + ident(nodeRole),
		"GRANT SELECT ON public.skipq_goose_version TO " + ident(nodeRole),
		"REVOKE INSERT, UPDATE ON skipq.sql_limits FROM " + ident(nodeRole),
	} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	n := startNode(t, nodeURL, func(c *node.Config) {
		c.Migrate = false // the role owns nothing
		c.Limits.MaxMessageBytes = 1000
	})
	n.send(t, "q", map[string]any{"body": "served"})
	// The seeded default still holds for SQL: the node could not lower it.
	if _, err := admin.Exec(ctx, "SELECT skipq.send('q', repeat('A', 1001))"); err != nil {
		t.Fatalf("SQL limits changed by a node that may not write them: %v", err)
	}
}
