package deploycheck_test

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	corev1 "k8s.io/api/core/v1"

	"github.com/skipq/skipq/internal/devpg"
	"github.com/skipq/skipq/internal/testdb"
	"github.com/skipq/skipq/internal/testport"
)

// TestChartPgBouncerRuns runs the PgBouncer configuration the chart writes
// (pgbouncer.ini and userlist.txt) in a real PgBouncer (Debian's, which
// `make test` installs) in front of a test database, changing only where it
// listens and the server's address, and sends a transaction through it
// with the chart's pooled URL: the file parses, SCRAM with the userlist's
// password admits the nodes' user and refuses a wrong password.
func TestChartPgBouncerRuns(t *testing.T) {
	bin, err := devpg.FindPgBouncer()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	server, err := pgconn.ParseConfig(testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	const password = "pgbouncer-test-pw"
	objs := decode(t, render(t, map[string]any{
		"secrets":   createdSecrets("postgres://" + server.User + ":" + password + "@db.internal:5432/" + server.Database),
		"pgbouncer": map[string]any{"enabled": true},
	}))
	files := find[corev1.Secret](t, objs, "skipq-pgbouncer").StringData
	pooled, err := url.Parse(find[corev1.Secret](t, objs, "skipq").StringData["pooled-database-url"])
	if err != nil {
		t.Fatal(err)
	}

	port := freePort(t)
	dir, err := os.MkdirTemp("", "skipq-chart-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ini := files["pgbouncer.ini"]
	for old, replacement := range map[string]string{
		"* = host=db.internal port=5432":          "* = host=" + server.Host + " port=" + strconv.Itoa(int(server.Port)),
		"listen_addr = 0.0.0.0":                   "listen_addr = 127.0.0.1",
		"listen_port = 6432":                      "listen_port = " + strconv.Itoa(port),
		"auth_file = /etc/pgbouncer/userlist.txt": "auth_file = " + filepath.Join(dir, "userlist.txt"),
	} {
		if !strings.Contains(ini, old+"\n") {
			t.Fatalf("the chart's pgbouncer.ini has no line %q:\n%s", old, ini)
		}
		ini = strings.Replace(ini, old+"\n", replacement+"\n", 1)
	}
	cred := pgbouncerUser(t)
	for name, content := range map[string]string{"pgbouncer.ini": ini, "userlist.txt": files["userlist.txt"]} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if cred != nil {
			if err := os.Chown(path, int(cred.Uid), int(cred.Gid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}

	var log bytes.Buffer
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})

	pooled.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var conn *pgx.Conn
	for conn == nil {
		conn, err = pgx.Connect(ctx, pooled.String())
		select {
		case <-exited:
			t.Fatalf("pgbouncer exited on the chart's configuration:\n%s", log.String())
		case <-ctx.Done():
			t.Fatalf("no connection through pgbouncer: %v\n%s", err, log.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var queues int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM skipq.queues").Scan(&queues); err != nil {
		t.Fatalf("a query through the chart's PgBouncer: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	wrong := *pooled
	wrong.User = url.UserPassword(server.User, "not-"+password)
	if c, err := pgx.Connect(ctx, wrong.String()); err == nil {
		c.Close(ctx)
		t.Fatal("pgbouncer admitted a wrong password: the userlist's SCRAM authentication is not in force")
	}
}

// pgbouncerUser is who runs pgbouncer: this user, or "postgres" when this
// is root (pgbouncer refuses root; the test cluster runs as postgres too).
func pgbouncerUser(t *testing.T) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// freePort is a loopback port in the deploy checks' range that nothing
// listens on now.
func freePort(t *testing.T) int { return testport.Free(t, 25000) }
