package migrations_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3"

	"github.com/skipq/skipq/internal/migrations"
	"github.com/skipq/skipq/internal/testdb"
)

// schemaSnapshot is what a migration's Down must restore exactly: every
// skipq function's definition (search_path and SECURITY DEFINER included)
// with its grants, every relation with its grants, and the version.
func schemaSnapshot(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var s string
	err = conn.QueryRow(ctx, `SELECT
		(SELECT coalesce(max(version_id), 0) FROM skipq_goose_version WHERE is_applied)::text || E'\n' ||
		(SELECT coalesce(string_agg(pg_get_functiondef(p.oid) || coalesce(p.proacl::text, 'default acl'),
		                            E'\n' ORDER BY p.oid::regprocedure::text), '')
		 FROM pg_proc p WHERE p.pronamespace = 'skipq'::regnamespace) || E'\n' ||
		(SELECT coalesce(string_agg(c.relname || ' ' || coalesce(c.relacl::text, 'default acl'),
		                            E'\n' ORDER BY c.relname), '')
		 FROM pg_class c WHERE c.relnamespace = 'skipq'::regnamespace)`).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// upTo migrates a fresh database to version, as the binary before the
// newest migration did.
func upTo(t *testing.T, url string, version int64) {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithTableName("skipq_goose_version"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(context.Background(), version); err != nil {
		t.Fatal(err)
	}
}

// The newest migration's Down gives back exactly the schema before it, and
// Up applies again on top of that.
func TestNewestMigrationDownRestoresThePreviousSchema(t *testing.T) {
	ctx := context.Background()
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	before := testdb.NewEmpty(t)
	upTo(t, before, latest-1)
	want := schemaSnapshot(t, before)

	url := testdb.NewEmpty(t)
	if err := migrations.Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	newest := schemaSnapshot(t, url)
	if err := migrations.Down(ctx, url); err != nil {
		t.Fatal(err)
	}
	if got := schemaSnapshot(t, url); got != want {
		t.Fatalf("after Down:\n%s\n\nwant (migrated to %d):\n%s", got, latest-1, want)
	}
	if err := migrations.Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	if got := schemaSnapshot(t, url); got != newest {
		t.Fatalf("Up after Down:\n%s\n\nwant:\n%s", got, newest)
	}
}
