package devpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skipq/skipq/internal/testport"
)

// tempDir is a cluster directory removed after the test, together with a
// relocated home (t.TempDir is 0700 root's, which "postgres" cannot enter).
func tempDir(t *testing.T) string {
	t.Helper()
	if _, err := FindBinaries(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "cluster")
	t.Cleanup(func() {
		if l, err := resolveLayout(Options{Dir: dir}); err == nil {
			os.RemoveAll(l.home)
			os.RemoveAll(l.sock)
		}
	})
	return dir
}

func query(t *testing.T, url, sql string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var s string
	if err := conn.QueryRow(ctx, sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// gone reports whether no process is left for pid: reaped or never ours.
func gone(pid int) bool {
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

func TestStartStop(t *testing.T) {
	ctx := context.Background()
	dir := tempDir(t)
	var log bytes.Buffer
	c, err := Start(ctx, Options{Dir: dir, Fast: true, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	pid := c.cmd.Process.Pid

	url := c.URL("postgres")
	if !strings.Contains(url, "host=/") {
		t.Errorf("URL %q: want a unix socket host", url)
	}
	for setting, want := range map[string]string{
		"max_connections":  "200",
		"max_wal_size":     "4GB",
		"fsync":            "off",
		"listen_addresses": "",
		"server_encoding":  "UTF8",
	} {
		if got := query(t, url, "SHOW "+setting); got != want {
			t.Errorf("%s = %q, want %q", setting, got, want)
		}
	}
	if os.Geteuid() == 0 {
		if got := query(t, url, "SELECT current_setting('data_directory')"); !strings.HasPrefix(got, "/") {
			t.Errorf("data_directory %q", got)
		}
	}

	if _, err := Start(ctx, Options{Dir: dir, Fast: true, Log: &log}); !errors.Is(err, ErrAlreadyRunning) {
		t.Errorf("second Start: err = %v, want already running", err)
	}

	for range 2 { // the second finds it there
		if err := c.CreateDatabase(ctx, "app db"); err != nil {
			t.Fatal(err)
		}
	}
	if got := query(t, c.URL("app db"), "SELECT current_database()"); got != "app db" {
		t.Errorf("current_database() = %q", got)
	}

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if !gone(pid) {
		t.Errorf("postgres pid %d still exists after Stop", pid)
	}
	if !strings.Contains(log.String(), "database system is shut down") {
		t.Errorf("no clean shutdown in the log:\n%s", log.String())
	}

	// A second run reuses the cluster.
	c, err = Start(ctx, Options{Dir: dir, Fast: true, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if got := query(t, c.URL("postgres"), "SELECT count(*)::text FROM pg_database WHERE datname = 'app db'"); got != "1" {
		t.Errorf("database lost between runs")
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestStartTCP(t *testing.T) {
	port := testport.Free(t, 26000)
	c, err := Start(context.Background(), Options{Dir: tempDir(t), Port: port, TCP: true, Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	want := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if c.URL("postgres") != want {
		t.Errorf("URL = %q, want %q", c.URL("postgres"), want)
	}
	if got := query(t, c.URL("postgres"), "SELECT inet_server_addr()::text"); got != "127.0.0.1/32" {
		t.Errorf("inet_server_addr() = %q", got)
	}
}

func TestLongSocketPath(t *testing.T) {
	dir := "/" + strings.Repeat("d", 120)
	l, err := resolveLayout(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.sock)+len("/.s.PGSQL.54329") > maxSocketPath || !strings.HasPrefix(l.sock, "/tmp/skipq-") {
		t.Errorf("socket dir %q", l.sock)
	}
}

// TestEnsureDaemonConcurrent has two processes bring up the same cluster at
// once; both must get the one server, which outlives them.
func TestEnsureDaemonConcurrent(t *testing.T) {
	dir := tempDir(t)
	defer StopDaemon(dir)
	cmds := make([]*exec.Cmd, 2)
	outs := make([]bytes.Buffer, 2)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestHelperEnsureDaemon$")
		cmds[i].Env = append(os.Environ(), "DEVPG_HELPER_DIR="+dir)
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	var urls []string
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper %d: %v\n%s", i, err, outs[i].String())
		}
		_, url, ok := strings.Cut(outs[i].String(), "URL ")
		if !ok {
			t.Fatalf("helper %d printed no URL:\n%s", i, outs[i].String())
		}
		urls = append(urls, strings.Fields(url)[0])
	}
	if urls[0] != urls[1] {
		t.Errorf("URLs differ: %q, %q", urls[0], urls[1])
	}

	// The helpers have exited; their server still runs and is reused.
	c, err := EnsureDaemon(context.Background(), Options{Dir: dir, Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	pid := c.l.serverPID()
	if pid == 0 {
		t.Fatal("no server running")
	}
	if got := query(t, c.URL("postgres"), "SELECT (pg_postmaster_start_time() < now())::text"); got != "true" {
		t.Errorf("query: %q", got)
	}
	if err := c.Stop(); err != nil || c.l.serverPID() != pid {
		t.Errorf("Stop on a daemon cluster must leave it running: err %v", err)
	}

	if err := StopDaemon(dir); err != nil {
		t.Fatal(err)
	}
	if c.l.serverPID() != 0 {
		t.Errorf("server still running after StopDaemon")
	}
	if err := StopDaemon(dir); err != nil {
		t.Errorf("StopDaemon with nothing running: %v", err)
	}
}

func TestHelperEnsureDaemon(t *testing.T) {
	dir := os.Getenv("DEVPG_HELPER_DIR")
	if dir == "" {
		t.Skip("helper process for TestEnsureDaemonConcurrent")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := EnsureDaemon(ctx, Options{Dir: dir, Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	query(t, c.URL("postgres"), "SELECT 'ok'")
	fmt.Printf("URL %s\n", c.URL("postgres"))
}

// TestCrashKillsEveryBackend: a kill -9 crash leaves no backend running.
// PostgreSQL makes each backend the leader of a process group of its own,
// so a kill of the postmaster's group alone leaves a busy backend running
// on (it notices the postmaster's death only when it next waits), where it
// may still commit and answer a statement sent after the crash.
func TestCrashKillsEveryBackend(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, Options{Dir: tempDir(t), Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}
	// A statement that computes for minutes and never waits on a latch.
	busy := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, "SELECT count(*) FROM generate_series(1, 10000000000)")
		busy <- err
	}()
	monitor, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	for active := false; !active; {
		if err := monitor.QueryRow(ctx, "SELECT count(*) = 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active'", backend).Scan(&active); err != nil {
			t.Fatal(err)
		}
	}
	_ = monitor.Close(ctx)

	if err := c.Crash(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if running(backend) {
		t.Errorf("backend %d still runs after Crash(SIGKILL)", backend)
		_ = syscall.Kill(backend, syscall.SIGKILL) // or the statement runs for minutes
	}
	if err := <-busy; err == nil {
		t.Error("the busy statement succeeded on a crashed server")
	}
}
