package devpg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// EnsureDaemon is for tests: like Start, but the server is detached (its own
// session, surviving this process) so that many test processes share one
// cluster, and a server already running on Dir is reused. Several processes
// may call it at once: Dir/lock serializes them. Stop the server with
// StopDaemon.
func EnsureDaemon(ctx context.Context, opts Options) (*Cluster, error) {
	l, binDir, unlock, err := setUp(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer unlock()
	c := &Cluster{l: l, port: l.port, sock: l.sock, tcp: opts.TCP, daemon: true, ownLog: true}

	if pid := l.serverPID(); pid != 0 {
		// Reuse it where it listens, whatever options started it.
		p, _ := l.readPIDFile()
		if p.port != 0 && p.sock != "" {
			c.port, c.sock = p.port, p.sock
		}
		if opts.TCP && p.listen == "" {
			return nil, fmt.Errorf("devpg: the server running on %s does not listen on TCP; stop it with StopDaemon first", l.data)
		}
		gone := func() bool { return !l.isServer(pid) }
		if err := c.waitReady(ctx, gone); err != nil {
			return nil, fmt.Errorf("devpg: the server (pid %d) running on %s does not answer: %w", pid, l.data, err)
		}
		return c, nil
	}

	// Its output always goes to a file: a pipe to this process would break
	// when this process exits (and `go test` waits for such pipes to close).
	log, err := l.openLog()
	if err != nil {
		return nil, err
	}
	defer log.Close() // the server has its own copy
	cmd, err := l.serverCommand(ctx, binDir, opts)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log // stdin: /dev/null
	cmd.SysProcAttr.Setsid = true     // no terminal's signals, no parent's process group
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("devpg: start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // reap it should it exit while we run; after that, init does
		close(done)
	}()
	if err := c.waitReady(ctx, func() bool { return isClosed(done) }); err != nil {
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		return nil, err
	}
	return c, nil
}

// StopDaemon stops the detached cluster in dir: any PgBouncer left in front
// of it (see Cluster.StartPgBouncer), then SIGINT (fast shutdown) to the
// postmaster named in postmaster.pid and up to 30s for it to exit. No error if
// nothing is running.
func StopDaemon(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	l, err := resolveLayout(Options{Dir: dir})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	unlock, err := lockDir(ctx, l.dir) // not while another process starts it
	if err != nil {
		return err
	}
	defer unlock()
	// The bouncers in front of it first: they die with the test processes
	// that started them, so any left would be strays.
	bouncerErr := StopPgBouncers(pgBouncerDirOf(l))
	if err := stopServer(l); err != nil {
		return err
	}
	return bouncerErr
}

// stopServer stops the daemon's postmaster, if one runs.
func stopServer(l *layout) error {
	pid := l.serverPID()
	if pid == 0 {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGINT); errors.Is(err, syscall.ESRCH) {
		return nil // it just exited
	} else if err != nil {
		return fmt.Errorf("devpg: stop postgres (pid %d): %w", pid, err)
	}
	if l.waitGone(pid, stopTimeout) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGQUIT) // immediate shutdown
	if l.waitGone(pid, 5*time.Second) {
		return fmt.Errorf("devpg: postgres (pid %d) did not shut down within %s; sent SIGQUIT", pid, stopTimeout)
	}
	return fmt.Errorf("devpg: postgres (pid %d) on %s is still running after SIGINT and SIGQUIT", pid, l.data)
}

// waitGone watches for the server to exit. It is not our child (or no longer
// is), so there is nothing to wait on but its presence.
func (l *layout) waitGone(pid int, timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if !l.isServer(pid) {
			return true
		}
	}
	return false
}

// lockDir takes an exclusive flock on dir/lock, polling so that ctx can end
// the wait. The lock goes with the process, so a crash never leaves it held.
func lockDir(ctx context.Context, dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("devpg: %w", err)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("devpg: lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("devpg: waiting for %s: %w", f.Name(), ctx.Err())
		case <-tick.C:
		}
	}
}
