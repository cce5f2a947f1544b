package main

// Black-box tests of the skipq binary: real processes, real signals.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skipq/skipq/internal/migrations"
	"github.com/skipq/skipq/internal/testdb"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "skipq-bin-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "skipq")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		panic("building skipq: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// process is a running `skipq serve`.
type process struct {
	cmd       *exec.Cmd
	addr      string
	listening chan string
	done      chan error
}

// serve starts `skipq serve` on a random loopback port and waits for its
// "listening" log line.
func serve(t *testing.T, dbURL string, env ...string) *process {
	t.Helper()
	p := startServe(t, dbURL, env...)
	p.waitListening(t)
	return p
}

// startServe starts `skipq serve` without waiting for it.
func startServe(t *testing.T, dbURL string, env ...string) *process {
	t.Helper()
	cmd := exec.Command(binary, "serve")
	cmd.Env = append(os.Environ(), "SKIPQ_DATABASE_URL="+dbURL, "SKIPQ_LISTEN_ADDR=127.0.0.1:0", "SKIPQ_AUTH=off")
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, listening: make(chan string, 1), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
				p.listening <- line.Addr
			}
		}
		io.Copy(io.Discard, stderr)
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *process) waitListening(t *testing.T) {
	t.Helper()
	select {
	case p.addr = <-p.listening:
	case err := <-p.done:
		t.Fatalf("skipq serve exited: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("skipq serve did not start listening in 30 s")
	}
}

func (p *process) get(path string) (int, error) {
	resp, err := http.Get("http://" + p.addr + path)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestConcurrentStartMigratesOnce(t *testing.T) {
	db := testdb.NewEmpty(t)
	var nodes []*process
	for range 3 { // started together, before any has migrated
		nodes = append(nodes, startServe(t, db))
	}
	for _, p := range nodes {
		p.waitListening(t)
		deadline := time.Now().Add(30 * time.Second)
		for {
			if status, _ := p.get("/readyz"); status == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a node never became ready")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// Counted by file: the numbers have gaps while branches hold ranges.
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	latest := int64(len(files))
	var versions, rows int64
	err = conn.QueryRow(context.Background(),
		"SELECT count(DISTINCT version_id), count(*) FROM skipq_goose_version WHERE version_id > 0").Scan(&versions, &rows)
	if err != nil {
		t.Fatal(err)
	}
	if versions != latest || rows != latest {
		t.Fatalf("%d migrations recorded in %d rows; want each of %d exactly once", versions, rows, latest)
	}
}

// SIGTERM drains (docs/RELIABILITY.md): the node stops taking connections at once,
// a parked long-poll returns early and empty, a request already being
// handled finishes (the node waits for it), then the process exits 0.
func TestSIGTERMDrains(t *testing.T) {
	db := testdb.New(t)
	p := serve(t, db)
	type result struct {
		status int
		body   string
		err    error
	}
	parked := make(chan result, 1)
	go func() {
		resp, err := http.Post("http://"+p.addr+"/v1/queues/q/messages/receive", "application/json",
			strings.NewReader(`{"waitSeconds": 60}`))
		if err != nil {
			parked <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		parked <- result{status: resp.StatusCode, body: string(b)}
	}()
	await(t, 10*time.Second, "the receive to park", func() bool { return waiting(t, p) })

	// A send in flight: its handler is running (it asked for the body,
	// 100 Continue) and waits for the body, which comes after the signal.
	const body = `{"body": "in flight"}`
	conn, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second)) // a broken drain fails, never hangs, the test
	fmt.Fprintf(conn, "POST /v1/queues/q/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n", len(body))
	answers := bufio.NewReader(conn)
	if resp, err := http.ReadResponse(answers, nil); err != nil || resp.StatusCode != http.StatusContinue {
		t.Fatalf("the send's handler did not ask for its body: %v %v", resp, err)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-parked:
		if r.err != nil || r.status != http.StatusOK || !strings.Contains(r.body, `"messages":[]`) {
			t.Fatalf("the parked receive ended with %d %q %v; want 200 and no messages", r.status, r.body, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM did not end the parked receive")
	}
	// New connections are refused while the send is still open.
	await(t, 10*time.Second, "the node to refuse new connections", func() bool {
		c, err := net.Dial("tcp", p.addr)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		t.Fatalf("skipq serve exited (%v) with a request in flight", err)
	default:
	}
	if _, err := io.WriteString(conn, body); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(answers, nil)
	if err != nil {
		t.Fatalf("the in-flight send got no answer: %v", err)
	}
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated || !strings.Contains(string(answer), `"messageId"`) {
		t.Fatalf("the in-flight send answered %d %s; want 201", resp.StatusCode, answer)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("skipq serve exited with %v after SIGTERM", err)
		}
		p.done <- nil // for the cleanup
	case <-time.After(30 * time.Second):
		t.Fatal("skipq serve did not exit after SIGTERM")
	}
	pg, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(context.Background())
	var stored int
	if err := pg.QueryRow(context.Background(), "SELECT count(*) FROM skipq.messages WHERE body = 'in flight'").Scan(&stored); err != nil || stored != 1 {
		t.Fatalf("%d copies of the in-flight send are stored (%v); want 1", stored, err)
	}
}

// await polls cond until it holds; timeout only stops a broken test (it
// is a wait, not an assertion of speed).
func await(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var waitersLine = regexp.MustCompile(`(?m)^skipq_longpoll_waiters (\d+)`)

func waiting(t *testing.T, p *process) bool {
	resp, err := http.Get("http://" + p.addr + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := waitersLine.FindSubmatch(b)
	return m != nil && string(m[1]) != "0"
}

func TestExitCodes(t *testing.T) {
	db := testdb.New(t)
	for _, c := range []struct {
		args []string
		env  []string
		code int
	}{
		{nil, nil, 2},
		{[]string{"nope"}, nil, 2},
		{[]string{"migrate"}, []string{"SKIPQ_DATABASE_URL=" + db}, 2},
		{[]string{"migrate", "sideways"}, []string{"SKIPQ_DATABASE_URL=" + db}, 2},
		{[]string{"migrate", "status"}, []string{"SKIPQ_DATABASE_URL="}, 1},
		{[]string{"migrate", "status"}, []string{"SKIPQ_DATABASE_URL=" + db}, 0},
		{[]string{"keys", "create", "--tenant", "t"}, []string{"SKIPQ_DATABASE_URL=" + db}, 2},
		{[]string{"serve", "--no-such-flag"}, nil, 2},
		{[]string{"serve"}, []string{"SKIPQ_DATABASE_URL=" + db, "SKIPQ_AUTH=maybe"}, 1},
	} {
		cmd := exec.Command(binary, c.args...)
		cmd.Env = append(os.Environ(), "DATABASE_URL=", "SKIPQ_DATABASE_URL=")
		cmd.Env = append(cmd.Env, c.env...)
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code {
			t.Errorf("skipq %v: exit %d, want %d", c.args, code, c.code)
		}
	}
}

func TestKeysCreatePrintsOnlyTheSecret(t *testing.T) {
	db := testdb.New(t)
	// Flags may come before or after the verb.
	cmd := exec.Command(binary, "keys", "--tenant", "acme", "create", "--role", "write", "--name", "ci")
	cmd.Env = append(os.Environ(), "SKIPQ_DATABASE_URL="+db)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^skq_[A-Z2-7]{52}\n$`).Match(stdout.Bytes()) {
		t.Fatalf("keys create printed %q; want the secret alone", stdout.String())
	}
}
