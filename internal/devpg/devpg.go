// Package devpg runs a private PostgreSQL cluster for development and tests,
// made with the machine's PostgreSQL server binaries under a directory of the
// repository (e.g. .skipq/dev).
//
// The server listens on a unix socket in a directory of its own (0700), with
// trust authentication for the "postgres" superuser; TCP on 127.0.0.1 only
// when asked. Run as root, the server runs as the "postgres" system user,
// because initdb and postgres refuse root. If that user cannot reach
// Options.Dir (a tree under /root, say), the data and socket directories move
// to $TMPDIR/skipq-<hash of Dir> and Dir/location records where they are; a
// socket path too long for the kernel moves to /tmp/skipq-<hash>.s.
package devpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Options for a private cluster. Dir is the cluster's home (e.g. ".skipq/dev"),
// holding data/ and the socket dir.
type Options struct {
	Dir  string // required
	Port int    // 0 = DefaultPort (54329), the unix socket's name; the server listens ONLY on the unix socket unless TCP is true
	TCP  bool   // also listen on 127.0.0.1:Port
	Fast bool   // tests: fsync=off, synchronous_commit=off, full_page_writes=off
	// Settings are more name=value server settings, after (so over)
	// devpg's own.
	Settings []string
	// Log receives the server's output (nil = Dir/postgres.log). EnsureDaemon
	// always uses that file: its server outlives the caller.
	Log io.Writer
}

// Times for the server to come up and to shut down.
const (
	readyTimeout = 30 * time.Second
	stopTimeout  = 30 * time.Second
)

// Cluster is a running private cluster.
type Cluster struct {
	l      *layout
	port   int
	sock   string
	tcp    bool
	daemon bool
	ownLog bool // output goes to Dir/postgres.log, worth quoting in errors

	// For a server started by Start: the child and when it has exited.
	cmd      *exec.Cmd
	done     chan struct{}
	waitErr  error // set before done is closed
	stopOnce sync.Once
	stopErr  error
}

// ErrAlreadyRunning is Start finding a server on the cluster's data
// directory: another process (a second `skipq dev` on the same directory,
// say) runs it.
var ErrAlreadyRunning = errors.New("devpg: a PostgreSQL server is already running")

// Start creates the cluster under opts.Dir if it does not exist, or reuses
// it, and runs postgres as a child of this process (not daemonized), returning
// once it accepts connections. It fails if a server already runs on that data
// directory. Call Stop to shut it down.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	l, binDir, unlock, err := setUp(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if pid := l.serverPID(); pid != 0 {
		return nil, fmt.Errorf("%w (pid %d) on %s; stop it first", ErrAlreadyRunning, pid, l.data)
	}
	log := opts.Log
	ownLog := log == nil
	if ownLog {
		f, err := l.openLog()
		if err != nil {
			return nil, err
		}
		defer f.Close() // the child has its own copy
		log = f
	}
	cmd, err := l.serverCommand(ctx, binDir, opts)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group: Ctrl-C in a terminal signals the whole
	// foreground group, and postgres must get its shutdown signal from Stop,
	// in order, after our clients have let go, not straight from the tty.
	cmd.SysProcAttr.Setpgid = true
	// Should this process die without calling Stop, postgres gets SIGINT (a
	// fast shutdown) rather than running on orphaned.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGINT
	c := &Cluster{l: l, port: l.port, sock: l.sock, tcp: opts.TCP, ownLog: ownLog, cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that forked the child exits, not
		// the process: keep this thread alive, locked, until postgres ends.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("devpg: start postgres: %w", err)
	}
	if err := c.waitReady(ctx, func() bool { return isClosed(c.done) }); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// setUp resolves and creates opts.Dir's layout, finds the binaries, and takes
// Dir/lock, so two callers never create or start the same cluster at once.
func setUp(ctx context.Context, opts Options) (*layout, string, func(), error) {
	l, err := resolveLayout(opts)
	if err != nil {
		return nil, "", nil, err
	}
	if err := l.prepare(); err != nil {
		return nil, "", nil, err
	}
	unlock, err := lockDir(ctx, l.dir)
	if err != nil {
		return nil, "", nil, err
	}
	binDir, err := binDirFor(l.data)
	if err != nil {
		unlock()
		return nil, "", nil, err
	}
	return l, binDir, unlock, nil
}

// Done is closed when a server started by Start has exited, by Stop or
// otherwise. For a cluster from EnsureDaemon it is nil (never ready).
func (c *Cluster) Done() <-chan struct{} {
	if c.daemon {
		return nil
	}
	return c.done
}

// Stop shuts down a server started by Start: SIGINT (fast shutdown: sessions
// are disconnected, then a checkpoint) and up to 30s to exit, then SIGQUIT
// (immediate shutdown, crash recovery at next start). For a cluster from
// EnsureDaemon it does nothing, since other processes may be using it; see
// StopDaemon.
func (c *Cluster) Stop() error {
	if c.daemon {
		return nil
	}
	c.stopOnce.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

func (c *Cluster) stop() error {
	select {
	case <-c.done:
		return fmt.Errorf("devpg: postgres had already exited: %w", c.waitErr)
	default:
	}
	// Only the postmaster: it shuts its backends down in order.
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("devpg: stop postgres: %w", err)
	}
	select {
	case <-c.done:
		return nil
	case <-time.After(stopTimeout):
	}
	_ = c.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-c.done:
		return fmt.Errorf("devpg: postgres did not shut down within %s; sent SIGQUIT", stopTimeout)
	case <-time.After(5 * time.Second):
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL) // the whole group: no stray backend
	<-c.done
	return fmt.Errorf("devpg: postgres ignored SIGINT and SIGQUIT; killed")
}

// Crash ends a server started by Start the hard way, for fault tests: sig
// SIGQUIT is an immediate shutdown (pg_ctl stop -m immediate: no
// checkpoint; the postmaster exits after its children); SIGKILL kills the
// postmaster and every process it started at once (as a power cut would),
// and returns once none of them runs. The next Start runs crash recovery
// from the WAL.
func (c *Cluster) Crash(sig syscall.Signal) error {
	if c.daemon {
		return errors.New("devpg: a shared daemon cluster cannot be crashed")
	}
	var err error
	c.stopOnce.Do(func() {
		var children []int
		if sig == syscall.SIGKILL {
			children, err = c.killAll()
		} else {
			err = c.cmd.Process.Signal(sig)
		}
		select {
		case <-c.done:
		case <-time.After(stopTimeout):
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.done
		}
		for deadline := time.Now().Add(stopTimeout); time.Now().Before(deadline) && slices.ContainsFunc(children, running); {
			time.Sleep(10 * time.Millisecond)
		}
	})
	return err
}

// killAll sends SIGKILL to the postmaster and to every process it started,
// and returns those. The postmaster's process group is not enough:
// PostgreSQL makes each child the leader of a group (and session) of its
// own, and a busy backend outlives its postmaster until it next waits --
// long enough to commit and answer a statement sent after the crash. The
// postmaster is stopped first, so that it starts no process between the
// listing and the kills.
func (c *Cluster) killAll() ([]int, error) {
	postmaster := c.cmd.Process.Pid
	if err := syscall.Kill(postmaster, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("devpg: stop the postmaster: %w", err)
	}
	children, err := childProcesses(postmaster)
	for _, pid := range children {
		_ = syscall.Kill(-pid, syscall.SIGKILL) // its group: anything it started
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if killErr := syscall.Kill(-postmaster, syscall.SIGKILL); err == nil {
		err = killErr
	}
	return children, err
}

// childProcesses are the processes whose parent is pid (from /proc).
func childProcesses(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("devpg: list processes: %w", err)
	}
	var children []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, parent, ok := processStat(child); ok && parent == pid {
			children = append(children, child)
		}
	}
	return children, nil
}

// running reports whether process pid exists and has not ended (a zombie
// waiting to be reaped has ended).
func running(pid int) bool {
	state, _, ok := processStat(pid)
	return ok && state != 'Z' && state != 'X'
}

// processStat reads a process's state and parent from /proc/PID/stat,
// "pid (command) state ppid ...", where the command may hold spaces and
// parentheses; ok is false when there is no such process.
func processStat(pid int) (state byte, parent int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 2 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	parent, err = strconv.Atoi(fields[1])
	return fields[0][0], parent, err == nil
}

// URL is a connection URL for database on this cluster, as the superuser
// "postgres" (no password: trust authentication).
func (c *Cluster) URL(database string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/" + database}
	if c.tcp {
		u.Host = "127.0.0.1:" + strconv.Itoa(c.port)
		u.RawQuery = "sslmode=disable"
	} else {
		// pgx and libpq take a directory as host= for a unix socket; the
		// slashes stay readable.
		host := strings.ReplaceAll(url.QueryEscape(c.sock), "%2F", "/")
		u.RawQuery = "host=" + host + "&port=" + strconv.Itoa(c.port) + "&sslmode=disable"
	}
	return u.String()
}

// CreateDatabase creates database name unless it exists.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("devpg: %w", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("devpg: %w", err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database: someone else just made it
		return nil
	}
	if err != nil {
		return fmt.Errorf("devpg: create database %s: %w", name, err)
	}
	return nil
}

// waitReady polls until the server accepts a connection, it exits, or 30s pass.
func (c *Cluster) waitReady(ctx context.Context, exited func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	cfg, err := pgx.ParseConfig(c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("devpg: %w", err)
	}
	cfg.ConnectTimeout = 2 * time.Second
	tail := func() string {
		if c.ownLog {
			return c.l.logTail()
		}
		return ""
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		if exited() {
			return fmt.Errorf("devpg: postgres exited while starting%s", tail())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devpg: postgres did not accept connections within %s: %w%s", readyTimeout, err, tail())
		case <-tick.C:
		}
	}
}

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
