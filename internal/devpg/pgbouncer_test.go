package devpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// connectExec connects to url the way a PgBouncer-safe client does: no
// prepared statement outlives a transaction.
func connectExec(t *testing.T, url string, params map[string]string) (*pgx.Conn, error) {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	for k, v := range params {
		cfg.RuntimeParams[k] = v
	}
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err == nil {
		t.Cleanup(func() { conn.Close(context.Background()) })
	}
	return conn, err
}

func TestPgBouncer(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, Options{Dir: tempDir(t), Fast: true, Log: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if err := c.CreateDatabase(ctx, "app db"); err != nil {
		t.Fatal(err)
	}
	b, err := c.StartPgBouncer(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()

	// Any database passes through, named by the direct URL.
	url, err := b.Through(c.URL("app db"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(url, "port=6432") || strings.Contains(url, "54329") {
		t.Errorf("Through = %q", url)
	}
	conn, err := connectExec(t, url, nil)
	if err != nil {
		t.Fatalf("connect through pgbouncer: %v%s", err, b.LogTail())
	}
	for i := range 2 { // two transactions, each on whichever server connection
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var db string
		var n int
		if err := tx.QueryRow(ctx, "SELECT current_database(), $1::int", i).Scan(&db, &n); err != nil {
			t.Fatal(err)
		}
		if db != "app db" || n != i {
			t.Errorf("got %q, %d", db, n)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// The admin console: transaction pooling, no ignored startup parameters.
	admin, err := connectExec(t, b.URL("pgbouncer"), nil)
	if err != nil {
		t.Fatal(err)
	}
	config := map[string]string{}
	rows, err := admin.Query(ctx, "SHOW CONFIG", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		config[fmt.Sprint(v[0])] = fmt.Sprint(v[1])
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"pool_mode": "transaction", "ignore_startup_parameters": "", "default_pool_size": "2", "listen_addr": ""} {
		if got, ok := config[k]; !ok || got != want {
			t.Errorf("pgbouncer %s = %q, want %q", k, got, want)
		}
	}

	// 1.18 refuses startup parameters it does not track, planner settings
	// among them; the ones it tracks pass.
	_, err = connectExec(t, url, map[string]string{"enable_seqscan": "off"})
	if err == nil || !strings.Contains(err.Error(), "unsupported startup parameter: enable_seqscan") {
		t.Errorf("connecting with enable_seqscan: err = %v, want the 1.18 refusal", err)
	}
	if _, err := connectExec(t, url, map[string]string{"application_name": "skipq", "timezone": "UTC"}); err != nil {
		t.Errorf("connecting with application_name and timezone: %v", err)
	}

	// A URL on another server cannot go through it.
	if _, err := b.Through("postgres://postgres@127.0.0.1:1/x"); !errors.Is(err, ErrNotBehindPgBouncer) {
		t.Errorf("Through(another server): err = %v", err)
	}

	pid, dir := b.Pid(), b.dir
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	if !gone(pid) {
		t.Errorf("pgbouncer pid %d still exists after Stop", pid)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left after Stop: %v", dir, err)
	}
}

// TestPgBouncerNeverStrays: a bouncer dies with the process that started it,
// and StopPgBouncers (StopDaemon) stops even a live one and cleans up.
func TestPgBouncerNeverStrays(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, Options{Dir: tempDir(t), Fast: true, Log: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	parent := c.pgBouncerDir()

	// A process that exits without Stop.
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPgBouncer$")
	cmd.Env = append(os.Environ(), "DEVPG_HELPER_SERVER="+c.URL("postgres"), "DEVPG_HELPER_DIR="+parent)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	_, after, ok := strings.Cut(string(out), "PID ")
	if !ok {
		t.Fatalf("helper printed no pid:\n%s", out)
	}
	pid, _ := strconv.Atoi(strings.Fields(after)[0])
	deadline := time.Now().Add(10 * time.Second)
	for !gone(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !gone(pid) {
		t.Errorf("pgbouncer pid %d outlived the process that started it", pid)
	}
	if left, _ := filepath.Glob(filepath.Join(parent, pgBouncerPrefix+"*")); len(left) != 1 {
		t.Fatalf("want the dead process's directory, got %v", left)
	}

	// The next bouncer sweeps it away.
	b, err := c.StartPgBouncer(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	if left, _ := filepath.Glob(filepath.Join(parent, pgBouncerPrefix+"*")); len(left) != 1 || left[0] != b.dir {
		t.Errorf("directories after a sweep: %v, want only %s", left, b.dir)
	}

	// StopPgBouncers stops a live one by its pid file.
	if err := StopPgBouncers(parent); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("pgbouncer still running after StopPgBouncers")
	}
	if left, _ := filepath.Glob(filepath.Join(parent, pgBouncerPrefix+"*")); len(left) != 0 {
		t.Errorf("directories left: %v", left)
	}
}

func TestHelperPgBouncer(t *testing.T) {
	server := os.Getenv("DEVPG_HELPER_SERVER")
	if server == "" {
		t.Skip("helper process for TestPgBouncerNeverStrays")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := StartPgBouncer(ctx, PgBouncerOptions{Server: server, Dir: os.Getenv("DEVPG_HELPER_DIR")})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("PID %d\n", b.Pid())
	// Exits without b.Stop().
}

func TestPgBouncerLongSocketPath(t *testing.T) {
	dir := "/" + strings.Repeat("d", 100) + "/" + pgBouncerPrefix + "x"
	if s := pgBouncerSocketDir(dir); len(s)+len("/.s.PGSQL.6432") > maxSocketPath || !strings.HasPrefix(s, "/tmp/skipq-") {
		t.Errorf("socket dir %q", s)
	}
}
