// Package testdb gives each test a database of its own, already migrated.
//
// The server is the one SKIPQ_TEST_DATABASE_URL points at (any database on a
// server where we may CREATE DATABASE), else a private cluster under
// <repo>/.skipq/test that devpg.EnsureDaemon starts and shares between test
// processes (`make test` stops it afterwards). The schema is migrated once
// into a template database; each test gets a cheap copy of it.
//
// ThroughPgBouncer gives the same database through PgBouncer in
// transaction-pooling mode, for the tests that run nodes behind one.
package testdb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skipq/skipq/internal/devpg"
	"github.com/skipq/skipq/internal/migrations"
)

// templateLock is the pg_advisory_lock key (in the server URL's database)
// held while a template is checked for and built: "skipqtdb".
const templateLock int64 = 0x736b6970_71746462

// Per-process: only the first test pays for finding the server and template.
var (
	setupOnce sync.Once
	serverURL string         // a database on the server, for CREATE/DROP DATABASE
	cluster   *devpg.Cluster // the private cluster; nil with SKIPQ_TEST_DATABASE_URL
	template  string
	setupErr  error
)

// The PgBouncer of ThroughPgBouncer, one per test process.
var (
	bouncerOnce sync.Once
	bouncer     atomic.Pointer[devpg.PgBouncer] // set once started
	bouncerErr  error
)

// New returns the URL of a fresh database for this test, a copy of a migrated
// template database, dropped (WITH (FORCE)) in t.Cleanup.
func New(t testing.TB) string {
	t.Helper()
	return create(t, func() string { return template })
}

// NewEmpty returns the URL of a fresh database with no schema at all (a copy
// of template0), for tests of migration itself; dropped in t.Cleanup.
func NewEmpty(t testing.TB) string {
	t.Helper()
	return create(t, func() string { return "template0" })
}

// ThroughPgBouncer returns url, a database on the test server (from New),
// going through PgBouncer in transaction-pooling mode instead, as production
// may run (docs/OPERATIONS.md#running-behind-pgbouncer): Debian's 1.18, which refuses unknown startup parameters
// and keeps no prepared statement across transactions. The bouncer is one per
// test process, started on first use (devpg.StartPgBouncer), and dies with
// the process. A URL on another server (a test's own proxy in front of the
// database, say) comes back as it is: the bouncer fronts the test server only.
func ThroughPgBouncer(t testing.TB, url string) string {
	t.Helper()
	ensureSetup(t)
	bouncerOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var b *devpg.PgBouncer
		if cluster != nil {
			b, bouncerErr = cluster.StartPgBouncer(ctx, 0)
		} else {
			b, bouncerErr = devpg.StartPgBouncer(ctx, devpg.PgBouncerOptions{Server: serverURL})
		}
		bouncer.Store(b)
	})
	if bouncerErr != nil {
		t.Fatalf("testdb: %v", bouncerErr)
	}
	through, err := bouncer.Load().Through(url)
	if errors.Is(err, devpg.ErrNotBehindPgBouncer) {
		t.Logf("testdb: not through PgBouncer, which fronts only the test server: %v", err)
		return url
	}
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	return through
}

// PgBouncerLogOffset is where the log of this process's PgBouncer (see
// ThroughPgBouncer) ends now, for PgBouncerLog; 0 when there is none.
func PgBouncerLogOffset() int64 {
	b := bouncer.Load()
	if b == nil {
		return 0
	}
	fi, err := os.Stat(b.LogPath())
	if err != nil {
		return 0
	}
	return fi.Size()
}

// PgBouncerLog quotes, for the message of a test that failed through this
// process's PgBouncer, what went wrong in it since offset: its last warnings
// and the reasons it closed connections, other than clients leaving. Lines
// about a refused client name no database ("(nodb)/(nouser)"), so they are
// told apart by time, not by database: the tests of a process that run
// nodes do not run in parallel.
func PgBouncerLog(offset int64) string {
	b := bouncer.Load()
	if b == nil {
		return ""
	}
	raw, err := os.ReadFile(b.LogPath())
	if err != nil {
		return ""
	}
	raw = raw[min(int64(len(raw)), offset):]
	var lines []string
	for line := range strings.Lines(string(raw)) {
		if strings.Contains(line, " WARNING ") || strings.Contains(line, " ERROR ") ||
			strings.Contains(line, "closing because") && !strings.Contains(line, "client close request") {
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		return "\n(nothing went wrong in " + b.LogPath() + ")"
	}
	lines = lines[max(0, len(lines)-maxLogLines):]
	return fmt.Sprintf("\n--- the last %d warnings in %s ---\n%s", len(lines), b.LogPath(), strings.Join(lines, ""))
}

// maxLogLines is how much of PgBouncer's log PgBouncerLog quotes.
const maxLogLines = 15

func ensureSetup(t testing.TB) {
	t.Helper()
	setupOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		serverURL, template, setupErr = setup(ctx)
	})
	if setupErr != nil {
		t.Fatalf("testdb: %v", setupErr)
	}
}

func create(t testing.TB, templateOf func() string) string {
	t.Helper()
	ensureSetup(t)
	template := templateOf()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := "t_" + strings.ToLower(rand.Text()[:16])
	err := withConn(ctx, serverURL, func(conn *pgx.Conn) error {
		return retryBusy(ctx, func() error {
			_, err := conn.Exec(ctx, "CREATE DATABASE "+ident(name)+" TEMPLATE "+ident(template))
			return err
		})
	})
	if err != nil {
		t.Fatalf("testdb: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := withConn(ctx, serverURL, func(conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)")
			return err
		})
		if err != nil {
			t.Errorf("testdb: drop database %s: %v", name, err)
		}
	})
	return withDatabase(serverURL, name)
}

// setup finds the server and makes sure the current template exists on it.
func setup(ctx context.Context) (server, tmpl string, err error) {
	server = os.Getenv("SKIPQ_TEST_DATABASE_URL")
	if server == "" {
		root, err := repoRoot()
		if err != nil {
			return "", "", err
		}
		c, err := devpg.EnsureDaemon(ctx, devpg.Options{Dir: filepath.Join(root, ".skipq", "test"), Fast: true})
		if err != nil {
			return "", "", err
		}
		cluster, server = c, c.URL("postgres")
	}
	hash, err := migrationsHash()
	if err != nil {
		return "", "", err
	}
	tmpl = "skipq_template_" + hash
	if err := ensureTemplate(ctx, server, tmpl, "skipq_build_"+hash); err != nil {
		return "", "", fmt.Errorf("template %s: %w", tmpl, err)
	}
	return server, tmpl, nil
}

// migrationsHash names the schema: a change to any migration, its name
// included (goose orders by it), gives a new template.
func migrationsHash() (string, error) {
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		return "", fmt.Errorf("migrations: %w", err)
	}
	h := sha256.New()
	for _, name := range names { // sorted by fs.Glob
		b, err := fs.ReadFile(migrations.FS, name)
		if err != nil {
			return "", fmt.Errorf("migrations: %w", err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// ensureTemplate creates database tmpl with the schema migrated, unless it
// exists. Test processes run in parallel, so the check and the build happen
// under an advisory lock. The build goes into another name and is renamed
// only when complete, so an interrupted build is never taken for a template.
func ensureTemplate(ctx context.Context, server, tmpl, build string) error {
	return withConn(ctx, server, func(conn *pgx.Conn) error {
		exists := func() (bool, error) {
			var ok bool
			err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", tmpl).Scan(&ok)
			return ok, err
		}
		if ok, err := exists(); ok || err != nil {
			return err
		}
		// Held until withConn closes the connection.
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLock); err != nil {
			return err
		}
		if ok, err := exists(); ok || err != nil {
			return err // another process built it while we waited
		}
		dropOthers(ctx, conn, tmpl) // including a build a crashed run left
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident(build)); err != nil {
			return err
		}
		if err := migrations.Up(ctx, withDatabase(server, build)); err != nil {
			return err
		}
		// CREATE DATABASE ... TEMPLATE fails while anyone is connected to
		// the template: bar connections to it, end any the migration left
		// behind, and rename it into place once they are gone.
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(build)+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", build); err != nil {
			return err
		}
		return retryBusy(ctx, func() error {
			_, err := conn.Exec(ctx, "ALTER DATABASE "+ident(build)+" RENAME TO "+ident(tmpl))
			return err
		})
	})
}

// dropOthers removes templates of other schemas and unfinished builds, so the
// test server does not fill up with them. Best effort: a process testing
// another checkout may be using one right now.
func dropOthers(ctx context.Context, conn *pgx.Conn, keep string) {
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database
		WHERE (datname LIKE 'skipq\_template\_%' OR datname LIKE 'skipq\_build\_%') AND datname <> $1`, keep)
	if err != nil {
		return
	}
	old, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, name := range old {
		// A template database cannot be dropped until it is not one.
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(name)+" IS_TEMPLATE false"); err == nil {
			_, _ = conn.Exec(ctx, "DROP DATABASE "+ident(name)+" WITH (FORCE)")
		}
	}
}

// retryBusy runs f again while it fails because a database it copies or
// renames still has a session (55006 object_in_use): sessions that were just
// closed linger for a moment in the server.
func retryBusy(ctx context.Context, f func() error) error {
	for attempt := 1; ; attempt++ {
		err := f()
		var pgErr *pgconn.PgError
		if attempt == 50 || !errors.As(err, &pgErr) || pgErr.Code != "55006" {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (still retrying: %w)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func withConn(ctx context.Context, url string, f func(*pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	return f(conn)
}

// withDatabase is url pointing at database name instead.
func withDatabase(server, name string) string {
	u, err := url.Parse(server)
	if err != nil { // setup connected with it, so it parses
		panic(fmt.Sprintf("testdb: %v", err))
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String()
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// repoRoot is the nearest directory above the working directory (a package's
// directory under `go test`) holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testdb: no go.mod above the working directory; set SKIPQ_TEST_DATABASE_URL")
		}
		dir = parent
	}
}
