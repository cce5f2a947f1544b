package devpg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// PgBouncer in transaction-pooling mode in front of a PostgreSQL server, the
// way production runs skipq behind Debian's pgbouncer 1.18 (docs/OPERATIONS.md#running-behind-pgbouncer): tests
// use it to check that nodes rely on no session state. It listens on a unix
// socket only (no TCP port to collide with), lets every database name through
// to the server (tests create databases on the fly), trusts the server's user,
// and keeps 1.18's refusal of startup parameters it does not track
// (ignore_startup_parameters stays empty): a client that sends planner
// settings at connect time gets
// "FATAL: unsupported startup parameter: enable_seqscan".
//
// pgx itself sends only user and database (plus what PGAPPNAME and friends, or
// the URL, ask for), so nothing needs ignoring for it; extra_float_digits is a
// JDBC habit, not pgx's.

// DefaultPgBouncerPort names PgBouncer's unix socket (.s.PGSQL.6432).
const DefaultPgBouncerPort = 6432

// pgBouncerPrefix starts the name of each bouncer's directory, so that
// sweeping a shared parent (the temp dir) touches nothing else.
const pgBouncerPrefix = "skipq-pgbouncer-"

var errNoPgBouncer = errors.New("devpg: pgbouncer not found; install it with `apt-get install pgbouncer` (`make test` does)")

// PgBouncerOptions for StartPgBouncer.
type PgBouncerOptions struct {
	// Server is a URL of any database on the PostgreSQL server to front: its
	// (first) host, a unix socket directory or a TCP host, its port, and its
	// user, whose password (if any) PgBouncer uses to log in.
	Server string
	// Dir is where bouncers live: each gets a fresh subdirectory of it
	// (config, auth file, pid file, log and, if the path is short enough, the
	// socket), removed by Stop. A subdirectory left by a process that died is
	// removed by the next StartPgBouncer in Dir, or by StopPgBouncers.
	// "" = the temp dir.
	Dir string
	// PoolSize is how many server connections each database gets; 0 = 20.
	PoolSize int
}

// PgBouncer is a running PgBouncer, a child of this process: should the
// process die without Stop, PgBouncer gets SIGTERM and exits too.
type PgBouncer struct {
	dir   string // its own directory
	sock  string // unix socket directory: dir, or a short one under /tmp
	user  string
	sHost string // the server it fronts
	sPort uint16
	lock  *os.File // flocked while we run: tells sweepers we are alive

	cmd      *exec.Cmd
	done     chan struct{}
	waitErr  error // set before done is closed
	stopOnce sync.Once
	stopErr  error
}

// FindPgBouncer returns the path of the pgbouncer program: on PATH, or in
// /usr/sbin where Debian puts it (not on a normal user's PATH).
func FindPgBouncer() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/pgbouncer", "/usr/local/sbin/pgbouncer", "/usr/local/bin/pgbouncer"} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errNoPgBouncer
}

// StartPgBouncer runs PgBouncer in front of opts.Server and returns once a
// query goes through it. Run as root, it runs as the "postgres" system user
// (PgBouncer refuses root), like the cluster.
func (c *Cluster) StartPgBouncer(ctx context.Context, poolSize int) (*PgBouncer, error) {
	return StartPgBouncer(ctx, PgBouncerOptions{Server: c.URL("postgres"), Dir: c.pgBouncerDir(), PoolSize: poolSize})
}

// pgBouncerDir holds the bouncers in front of this cluster, where its user
// can reach them and StopDaemon finds them.
func (c *Cluster) pgBouncerDir() string { return pgBouncerDirOf(c.l) }

func pgBouncerDirOf(l *layout) string { return filepath.Join(l.home, "pgbouncer") }

// StartPgBouncer runs PgBouncer in front of opts.Server; see PgBouncerOptions.
func StartPgBouncer(ctx context.Context, opts PgBouncerOptions) (*PgBouncer, error) {
	bin, err := FindPgBouncer()
	if err != nil {
		return nil, err
	}
	server, err := pgconn.ParseConfig(opts.Server)
	if err != nil {
		return nil, fmt.Errorf("devpg: pgbouncer server URL: %w", err)
	}
	cred, err := clusterUser()
	if err != nil {
		return nil, err
	}
	parent := opts.Dir
	if parent == "" {
		parent = os.TempDir()
		if cred != nil && !traversable(parent, cred) {
			parent = "/tmp"
		}
	}
	if parent, err = filepath.Abs(parent); err != nil {
		return nil, fmt.Errorf("devpg: %w", err)
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("devpg: %w", err)
	}
	if cred != nil && !traversable(parent, cred) {
		return nil, fmt.Errorf("devpg: the \"postgres\" user, which runs pgbouncer, cannot reach %s", parent)
	}
	_ = sweepPgBouncers(parent, false) // what dead processes left
	poolSize := opts.PoolSize
	if poolSize <= 0 {
		poolSize = 20
	}

	dir, err := os.MkdirTemp(parent, pgBouncerPrefix)
	if err != nil {
		return nil, fmt.Errorf("devpg: %w", err)
	}
	b := &PgBouncer{dir: dir, sock: pgBouncerSocketDir(dir), user: server.User, sHost: server.Host, sPort: server.Port, done: make(chan struct{})}
	fail := func(err error) (*PgBouncer, error) {
		b.removeFiles()
		return nil, err
	}
	// First, before anything else is in dir: a sweeper skips a dir whose
	// lock is held, and one too young to have a lock yet.
	if b.lock, err = os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return fail(fmt.Errorf("devpg: %w", err))
	}
	if err := syscall.Flock(int(b.lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fail(fmt.Errorf("devpg: lock %s: %w", b.lock.Name(), err))
	}
	own := &layout{cred: cred}
	// 0700 and the server user's: with trust authentication, whoever
	// reaches the socket is the server's user.
	if err := own.ownedDir(dir, 0o700, true); err != nil {
		return fail(err)
	}
	if b.sock != dir {
		if err := own.ownedDir(b.sock, 0o700, true); err != nil {
			return fail(err)
		}
	}
	ini, err := b.writeConfig(server, poolSize, cred)
	if err != nil {
		return fail(err)
	}
	log, err := os.OpenFile(b.logPath(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fail(fmt.Errorf("devpg: %w", err))
	}
	defer log.Close() // the child has its own copy

	// Not ctx: it only bounds starting.
	b.cmd = exec.Command(bin, ini)
	b.cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			b.cmd.Env = append(b.cmd.Env, kv)
		}
	}
	b.cmd.Stdout, b.cmd.Stderr = log, log
	b.cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: cred,
		// Not the terminal's Ctrl-C: Stop (or our death) ends it.
		Setpgid: true,
		// SIGTERM is 1.18's immediate shutdown. Set after the switch to
		// cred, so the kernel keeps it.
		Pdeathsig: syscall.SIGTERM,
	}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that forked the child exits:
		// keep this one, locked, until pgbouncer ends.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := b.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		b.waitErr = b.cmd.Wait()
		close(b.done)
	}()
	if err := <-started; err != nil {
		return fail(fmt.Errorf("devpg: start pgbouncer: %w", err))
	}
	if err := b.waitReady(ctx, server.Database); err != nil {
		_ = b.Stop()
		return nil, err
	}
	return b, nil
}

// pgBouncerSocketDir is dir, unless the socket's path would be too long for
// the kernel: then a directory in /tmp named after dir.
func pgBouncerSocketDir(dir string) string {
	if len(dir)+len("/.s.PGSQL.")+len(strconv.Itoa(DefaultPgBouncerPort)) > maxSocketPath {
		return filepath.Join("/tmp", "skipq-"+shortHash(dir)+".b")
	}
	return dir
}

func (b *PgBouncer) logPath() string { return filepath.Join(b.dir, "pgbouncer.log") }

// LogPath is the file pgbouncer logs to (until Stop removes it).
func (b *PgBouncer) LogPath() string { return b.logPath() }

// writeConfig writes pgbouncer.ini and the auth file, readable by cred only.
func (b *PgBouncer) writeConfig(server *pgconn.Config, poolSize int, cred *syscall.Credential) (string, error) {
	for _, v := range []string{server.Host, b.dir, b.sock} {
		// The ini format has no escapes; a connection string value
		// quoted with ' cannot hold one.
		if strings.ContainsAny(v, "'\\\n\r") {
			return "", fmt.Errorf("devpg: pgbouncer cannot be configured with the path or host %q", v)
		}
	}
	auth := filepath.Join(b.dir, "users.txt")
	ini := filepath.Join(b.dir, "pgbouncer.ini")
	quote := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
	files := map[string]string{
		// With auth_type trust a client gives no password, but its user
		// must be listed; the password is what PgBouncer logs in with.
		auth: quote(server.User) + " " + quote(server.Password) + "\n",
		ini: strings.Join([]string{
			"; Written by devpg.StartPgBouncer for skipq's tests.",
			"[databases]",
			"; Any database name goes to the server, as the client's user.",
			fmt.Sprintf("* = host='%s' port=%d", server.Host, server.Port),
			"",
			"[pgbouncer]",
			"; No listen_addr: the unix socket only.",
			"unix_socket_dir = " + b.sock,
			"listen_port = " + strconv.Itoa(DefaultPgBouncerPort),
			"pidfile = " + filepath.Join(b.dir, "pgbouncer.pid"),
			"auth_type = trust",
			"auth_file = " + auth,
			"admin_users = " + server.User,
			"pool_mode = transaction",
			"; Unused in transaction mode anyway: nothing is reset between clients.",
			"server_reset_query =",
			"max_client_conn = 2000",
			"default_pool_size = " + strconv.Itoa(poolSize),
			"; Tests drop databases under open server connections: retry soon.",
			"server_login_retry = 1",
			"; ignore_startup_parameters stays empty, as in 1.18's default:",
			"; any startup parameter but client_encoding, datestyle, timezone,",
			"; standard_conforming_strings and application_name is refused.",
			"",
		}, "\n"),
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return "", fmt.Errorf("devpg: %w", err)
		}
		if cred != nil {
			if err := os.Lchown(path, int(cred.Uid), int(cred.Gid)); err != nil {
				return "", fmt.Errorf("devpg: %w", err)
			}
		}
	}
	return ini, nil
}

// waitReady polls until a query on database goes through the bouncer to the
// server, pgbouncer exits, or 30s pass.
func (b *PgBouncer) waitReady(ctx context.Context, database string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	cfg, err := pgx.ParseConfig(b.URL(database))
	if err != nil {
		return fmt.Errorf("devpg: %w", err)
	}
	cfg.ConnectTimeout = 2 * time.Second
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	try := func() error {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close(context.Background()) }()
		_, err = conn.Exec(ctx, "SELECT 1")
		return err
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := try()
		if err == nil {
			return nil
		}
		if isClosed(b.done) {
			return fmt.Errorf("devpg: pgbouncer exited while starting: %v%s", b.waitErr, b.LogTail())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devpg: no query went through pgbouncer within %s: %w%s", readyTimeout, err, b.LogTail())
		case <-tick.C:
		}
	}
}

// URL is a connection URL for database through the bouncer, as the server
// URL's user (no password: the bouncer trusts it).
func (b *PgBouncer) URL(database string) string {
	u := url.URL{Scheme: "postgres", User: url.User(b.user), Path: "/" + database}
	u.RawQuery = b.query("")
	return u.String()
}

// query is the query string raw with host and port naming the bouncer.
func (b *PgBouncer) query(raw string) string {
	host := strings.ReplaceAll(url.QueryEscape(b.sock), "%2F", "/")
	q := "host=" + host + "&port=" + strconv.Itoa(DefaultPgBouncerPort)
	if raw == "" {
		return q + "&sslmode=disable"
	}
	return q + "&" + raw
}

// ErrNotBehindPgBouncer is what Through says of a URL on another server than
// the bouncer's.
var ErrNotBehindPgBouncer = errors.New("devpg: the URL is not on the server behind this pgbouncer")

// Through returns dbURL (a postgres:// URL of a database on the bouncer's
// server) going through the bouncer instead: same database, user and other
// parameters; no password, since the bouncer trusts its user.
func (b *PgBouncer) Through(dbURL string) (string, error) {
	cfg, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		return "", fmt.Errorf("devpg: %w", err)
	}
	if cfg.Host != b.sHost || cfg.Port != b.sPort {
		return "", fmt.Errorf("%w: %s:%d, not %s:%d", ErrNotBehindPgBouncer, cfg.Host, cfg.Port, b.sHost, b.sPort)
	}
	if cfg.User != b.user {
		return "", fmt.Errorf("devpg: pgbouncer lets only user %q in, not %q", b.user, cfg.User)
	}
	u, err := url.Parse(dbURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("devpg: not a postgres:// URL: %q", dbURL)
	}
	q := u.Query()
	for _, k := range []string{"host", "hostaddr", "port", "password"} {
		q.Del(k)
	}
	if q.Get("sslmode") == "" {
		q.Set("sslmode", "disable")
	}
	u.Host = ""
	u.User = url.User(cfg.User)
	u.RawQuery = b.query(q.Encode())
	return u.String(), nil
}

// Done is closed when pgbouncer has exited.
func (b *PgBouncer) Done() <-chan struct{} { return b.done }

// Pid is pgbouncer's process id.
func (b *PgBouncer) Pid() int { return b.cmd.Process.Pid }

// LogTail is the end of pgbouncer's log, for error messages.
func (b *PgBouncer) LogTail() string {
	bs, err := os.ReadFile(b.logPath())
	if err != nil || len(bs) == 0 {
		return ""
	}
	if len(bs) > 2000 {
		bs = bs[len(bs)-2000:]
	}
	return "\n--- end of " + b.logPath() + " ---\n" + string(bs)
}

// Stop shuts pgbouncer down (SIGTERM, 1.18's immediate shutdown: clients are
// disconnected) and removes its directory.
func (b *PgBouncer) Stop() error {
	b.stopOnce.Do(func() {
		b.stopErr = b.stop()
		b.removeFiles()
	})
	return b.stopErr
}

func (b *PgBouncer) stop() error {
	select {
	case <-b.done:
		return fmt.Errorf("devpg: pgbouncer had already exited: %v%s", b.waitErr, b.LogTail())
	default:
	}
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("devpg: stop pgbouncer: %w", err)
	}
	select {
	case <-b.done:
		return nil
	case <-time.After(10 * time.Second):
	}
	_ = b.cmd.Process.Kill()
	<-b.done
	return fmt.Errorf("devpg: pgbouncer ignored SIGTERM for 10s; killed")
}

func (b *PgBouncer) removeFiles() {
	if b.sock != b.dir {
		_ = os.RemoveAll(b.sock)
	}
	_ = os.RemoveAll(b.dir)
	if b.lock != nil {
		b.lock.Close()
	}
}

// StopPgBouncers stops every bouncer under dir (PgBouncerOptions.Dir), those
// of live processes included, and removes their directories. No error if
// there are none.
func StopPgBouncers(dir string) error {
	return sweepPgBouncers(dir, true)
}

// sweepPgBouncers removes the bouncer directories under parent whose process
// is gone (all: every one), first killing a pgbouncer still running there.
// Normally none is: pgbouncer dies with the process that started it.
func sweepPgBouncers(parent string, all bool) error {
	entries, err := os.ReadDir(parent)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("devpg: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), pgBouncerPrefix) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		if !all && pgBouncerOwnerAlive(dir) {
			continue
		}
		if err := killPgBouncerIn(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		if s := pgBouncerSocketDir(dir); s != dir {
			_ = os.RemoveAll(s)
		}
		_ = os.RemoveAll(dir)
	}
	return errors.Join(errs...)
}

// pgBouncerOwnerAlive reports whether the process that made dir still holds
// its lock, or may be about to take it (dir is under a minute old).
func pgBouncerOwnerAlive(dir string) bool {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR, 0)
	if err != nil {
		fi, err := os.Stat(dir)
		return err == nil && time.Since(fi.ModTime()) < time.Minute
	}
	defer f.Close() // releases the lock if we got it
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil
}

// killPgBouncerIn stops the pgbouncer named by dir/pgbouncer.pid, if that pid
// is still a pgbouncer on dir's config (a pid can be reused).
func killPgBouncerIn(dir string) error {
	bs, err := os.ReadFile(filepath.Join(dir, "pgbouncer.pid"))
	if err != nil {
		return nil
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(bs)))
	ini := filepath.Join(dir, "pgbouncer.ini")
	isOurs := func() bool {
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		return err == nil && strings.Contains(string(cmdline), "\x00"+ini)
	}
	if pid <= 0 || !isOurs() {
		return nil
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		_ = syscall.Kill(pid, sig)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if !isOurs() {
				return nil
			}
		}
	}
	return fmt.Errorf("devpg: pgbouncer (pid %d) in %s survives SIGKILL", pid, dir)
}
