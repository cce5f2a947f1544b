package devpg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// initdb creates the cluster unless data/ already holds one. It builds in a
// side directory and renames it into place, so an interrupted initdb never
// leaves a half-made data/ that looks real.
func (l *layout) initdb(ctx context.Context, binDir string, fast bool) error {
	if _, err := os.Stat(filepath.Join(l.data, "PG_VERSION")); err == nil {
		return nil
	}
	if _, err := os.Stat(l.data); err == nil {
		return fmt.Errorf("devpg: %s exists but holds no cluster (no PG_VERSION); remove it", l.data)
	}
	tmp := l.data + ".initdb"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("devpg: %w", err)
	}
	if err := l.ownedDir(tmp, 0o700, true); err != nil {
		return err
	}
	args := []string{"-D", tmp, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"}
	if fast {
		args = append(args, "--no-sync") // tests: the cluster is disposable
	}
	cmd := l.command(ctx, filepath.Join(binDir, "initdb"), args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("devpg: initdb %s: %w\n%s", l.data, err, out)
	}
	if err := os.Rename(tmp, l.data); err != nil {
		return fmt.Errorf("devpg: %w", err)
	}
	return nil
}

// serverCommand makes the cluster if need be and prepares its server.
func (l *layout) serverCommand(ctx context.Context, binDir string, opts Options) (*exec.Cmd, error) {
	if err := l.initdb(ctx, binDir, opts.Fast); err != nil {
		return nil, err
	}
	if err := l.removeStalePIDFile(); err != nil {
		return nil, err
	}
	// Not ctx: it only bounds starting, and the server must outlive it.
	return l.command(context.Background(), filepath.Join(binDir, "postgres"), l.serverArgs(binDir, opts)...), nil
}

// serverArgs are postgres's command-line arguments.
func (l *layout) serverArgs(binDir string, opts Options) []string {
	listen := ""
	if opts.TCP {
		listen = "127.0.0.1"
	}
	settings := []string{
		"listen_addresses=" + listen,
		// The list syntax splits on commas; quoting keeps any path whole.
		`unix_socket_directories="` + strings.ReplaceAll(l.sock, `"`, `""`) + `"`,
		"max_connections=200",
		"shared_buffers=256MB",
		// Queue benchmarks write WAL fast enough to cross the default 1GB
		// between checkpoints every few seconds, and the checkpoints then
		// dominate the numbers (as published measurements of PostgreSQL queues show).
		"max_wal_size=4GB",
	}
	if opts.Fast {
		// Tests only: a crash may corrupt the cluster, which tests recreate.
		settings = append(settings, "fsync=off", "synchronous_commit=off", "full_page_writes=off")
	}
	if lib := preloadLibraries(binDir); lib != "" {
		settings = append(settings, "shared_preload_libraries="+lib)
	}
	settings = append(settings, opts.Settings...)
	args := []string{"-D", l.data, "-p", strconv.Itoa(l.port)}
	for _, s := range settings {
		args = append(args, "-c", s)
	}
	return args
}

// command prepares a PostgreSQL program to run as the cluster's user.
func (l *layout) command(ctx context.Context, path string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	// The caller's working directory may be one the cluster's user cannot
	// enter (e.g. under /root); some PostgreSQL tools fail on that.
	cmd.Dir = l.home
	// PG* variables are meant for clients; PGDATA, PGPORT or PGHOST would
	// quietly change what the server does.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: l.cred}
	return cmd
}

// openLog opens Dir/postgres.log for a server's output, keeping the previous
// run's log as postgres.log.1.
func (l *layout) openLog() (*os.File, error) {
	path := filepath.Join(l.dir, "postgres.log")
	if err := os.Rename(path, path+".1"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("devpg: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("devpg: %w", err)
	}
	return f, nil
}

// logTail is the end of Dir/postgres.log, for errors about a server that
// would not start.
func (l *layout) logTail() string {
	b, err := os.ReadFile(filepath.Join(l.dir, "postgres.log"))
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return "\n--- end of " + filepath.Join(l.dir, "postgres.log") + " ---\n" + string(b)
}

// pidFile is what postmaster.pid says about a running server.
type pidFile struct {
	pid    int
	port   int
	sock   string // first unix socket directory
	listen string // first TCP listen address, "" when none
}

func (l *layout) readPIDFile() (pidFile, bool) {
	b, err := os.ReadFile(filepath.Join(l.data, "postmaster.pid"))
	if err != nil {
		return pidFile{}, false
	}
	// Lines: pid, data dir, start time, port, socket dir, listen address, ...
	lines := strings.Split(string(b), "\n")
	var p pidFile
	p.pid, _ = strconv.Atoi(strings.TrimSpace(lines[0]))
	if len(lines) > 5 {
		p.port, _ = strconv.Atoi(strings.TrimSpace(lines[3]))
		p.sock = strings.TrimSpace(lines[4])
		p.listen = strings.TrimSpace(strings.Split(lines[5], ",")[0])
	}
	return p, p.pid > 0
}

// serverPID returns the pid of the postmaster running on this data dir, or 0.
// postmaster.pid alone can be stale and name a pid since reused, so the
// process must also have the data dir as its working directory, which the
// postmaster (and only a server on this cluster) has.
func (l *layout) serverPID() int {
	p, ok := l.readPIDFile()
	if !ok || !l.isServer(p.pid) {
		return 0
	}
	return p.pid
}

func (l *layout) isServer(pid int) bool {
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if err != nil { // gone, a zombie, or not ours to inspect
		return false
	}
	data, err := filepath.EvalSymlinks(l.data)
	return err == nil && cwd == data
}

// removeStalePIDFile deletes a postmaster.pid naming a live process that is
// not this cluster's server (a pid reused after a reboot), which would make
// postgres refuse to start. One naming a dead pid stays: postgres handles it
// itself, and uses it to check that no old backend still holds shared memory.
func (l *layout) removeStalePIDFile() error {
	p, ok := l.readPIDFile()
	if !ok || l.isServer(p.pid) {
		return nil
	}
	if err := syscall.Kill(p.pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
		if err := os.Remove(filepath.Join(l.data, "postmaster.pid")); err != nil {
			return fmt.Errorf("devpg: stale postmaster.pid: %w", err)
		}
	}
	return nil
}
