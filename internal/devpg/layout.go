package devpg

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// DefaultPort names the unix socket (.s.PGSQL.54329) and, with TCP, the port.
// It is not 5432 so a system PostgreSQL can run beside the private cluster.
const DefaultPort = 54329

// locationFile, inside Options.Dir, records that the cluster lives elsewhere
// (see clusterHome). It holds one absolute path.
const locationFile = "location"

// maxSocketPath is the longest unix socket path PostgreSQL accepts
// (sizeof(sun_path) - 1).
const maxSocketPath = 107

// layout is where one cluster's files are.
type layout struct {
	dir  string // absolute Options.Dir: lock file, log, location file
	home string // holds data/ and usually sock/: dir itself, or a relocated dir
	data string
	sock string // unix socket directory
	port int
	cred *syscall.Credential // the user the server runs as; nil = ourselves
}

// resolveLayout works out where the cluster for opts lives without creating
// anything, so StopDaemon can use it on a directory that may not exist.
func resolveLayout(opts Options) (*layout, error) {
	if opts.Dir == "" {
		return nil, errors.New("devpg: Options.Dir is required")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("devpg: %w", err)
	}
	cred, err := clusterUser()
	if err != nil {
		return nil, err
	}
	port := opts.Port
	if port == 0 {
		port = DefaultPort
	}
	home, err := clusterHome(dir, cred)
	if err != nil {
		return nil, err
	}
	l := &layout{dir: dir, home: home, data: filepath.Join(home, "data"), sock: filepath.Join(home, "sock"), port: port, cred: cred}
	if len(l.sock)+len("/.s.PGSQL.")+len(strconv.Itoa(port)) > maxSocketPath {
		// Deep working trees: PostgreSQL cannot bind such a socket. /tmp
		// (not os.TempDir, which may itself be long) keeps it short.
		l.sock = filepath.Join("/tmp", "skipq-"+shortHash(dir)+".s")
	}
	return l, nil
}

// clusterUser is who the server runs as. initdb and postgres refuse to run as
// root, so root runs them as the unprivileged "postgres" system user that the
// Debian package creates; anyone else runs them as themselves.
func clusterUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("devpg: running as root, the cluster must run as the unprivileged \"postgres\" user, which was not found (apt-get install postgresql creates it, or run make): %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("devpg: postgres uid: %w", err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("devpg: postgres gid: %w", err)
	}
	// Groups nil: the child drops root's supplementary groups.
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// clusterHome picks where data/ and sock/ go. Normally that is dir itself, but
// when root runs the cluster as "postgres" from a tree that user cannot reach
// (e.g. under /root, mode 0700), the server could not open its own data
// directory. Then the home moves to the temp dir, named by a hash of dir so each
// tree keeps its own cluster, and dir/location records the choice.
func clusterHome(dir string, cred *syscall.Credential) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, locationFile))
	if err == nil {
		if home := strings.TrimSpace(string(b)); filepath.IsAbs(home) {
			return home, nil
		}
		return "", fmt.Errorf("devpg: %s does not hold an absolute path", filepath.Join(dir, locationFile))
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("devpg: %w", err)
	}
	if cred == nil || traversable(dir, cred) {
		return dir, nil
	}
	home := filepath.Join(os.TempDir(), "skipq-"+shortHash(dir))
	if !traversable(home, cred) {
		home = filepath.Join("/tmp", "skipq-"+shortHash(dir))
	}
	return home, nil
}

// traversable reports whether the user in cred can reach path: every existing
// directory on the way needs the execute bit of the class (owner, group, other)
// that applies to that user. Missing directories will be created 0755.
func traversable(path string, cred *syscall.Credential) bool {
	for p := path; ; p = filepath.Dir(p) {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err == nil {
			var bit uint32 = 0o001
			switch {
			case st.Uid == cred.Uid:
				bit = 0o100
			case st.Gid == cred.Gid:
				bit = 0o010
			}
			if st.Mode&bit == 0 {
				return false
			}
		}
		if p == filepath.Dir(p) {
			return true
		}
	}
}

// prepare creates the cluster's directories with the owners and modes the
// server needs, and records a relocated home.
func (l *layout) prepare() error {
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return fmt.Errorf("devpg: %w", err)
	}
	if l.home != l.dir {
		if err := l.ownedDir(l.home, 0o755, false); err != nil {
			return err
		}
		// Written aside and renamed into place: os.WriteFile truncates
		// first, and a process starting the same cluster at that moment
		// (clusterHome) would read an empty note.
		note := filepath.Join(l.dir, locationFile)
		tmp, err := os.CreateTemp(l.dir, locationFile+".*")
		if err != nil {
			return fmt.Errorf("devpg: %w", err)
		}
		_, werr := tmp.WriteString(l.home + "\n")
		if cerr := tmp.Close(); werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Chmod(tmp.Name(), 0o644)
		}
		if werr == nil {
			werr = os.Rename(tmp.Name(), note)
		}
		if werr != nil {
			_ = os.Remove(tmp.Name())
			return fmt.Errorf("devpg: %w", werr)
		}
	}
	// 0700: with trust authentication, whoever can reach the socket is
	// superuser, so only the cluster's user (and root) may.
	return l.ownedDir(l.sock, 0o700, true)
}

// ownedDir creates dir with mode, owned by the server's user when forServer.
// An existing dir must already belong to us or that user: these dirs may sit
// in /tmp, where someone else could have made the name first.
func (l *layout) ownedDir(dir string, mode os.FileMode, forServer bool) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err == nil {
		if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			return fmt.Errorf("devpg: %s exists and is not a directory", dir)
		}
		if st.Uid != uint32(os.Geteuid()) && (l.cred == nil || st.Uid != l.cred.Uid) {
			return fmt.Errorf("devpg: %s belongs to uid %d; remove it", dir, st.Uid)
		}
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return fmt.Errorf("devpg: %w", err)
	}
	if forServer && l.cred != nil {
		if err := os.Lchown(dir, int(l.cred.Uid), int(l.cred.Gid)); err != nil {
			return fmt.Errorf("devpg: %w", err)
		}
	}
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("devpg: %w", err)
	}
	return nil
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:5])
}
