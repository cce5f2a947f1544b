package devpg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

var errNoBinaries = errors.New("devpg: PostgreSQL server binaries (initdb, postgres) not found; install them with `apt-get install postgresql` (or run `make`, which does it)")

// FindBinaries returns the directory holding initdb, postgres and pg_ctl:
// `pg_config --bindir` when pg_config is on PATH and that directory has the
// server, else the highest version under /usr/lib/postgresql/*/bin (Debian's
// layout, which does not put the server on PATH).
func FindBinaries() (string, error) {
	dirs := binDirs()
	if len(dirs) == 0 {
		return "", errNoBinaries
	}
	return dirs[0], nil
}

// EnsureBinaries installs the `postgresql` Debian package with apt-get (update
// first) when FindBinaries fails and we are root; returns FindBinaries' result.
// apt-get's output goes to log.
func EnsureBinaries(ctx context.Context, log io.Writer) (string, error) {
	if dir, err := FindBinaries(); err == nil || os.Geteuid() != 0 {
		return dir, err
	}
	aptGet, err := exec.LookPath("apt-get")
	if err != nil {
		return "", fmt.Errorf("%w (apt-get: %w)", errNoBinaries, err)
	}
	if log == nil {
		log = io.Discard
	}
	fmt.Fprintln(log, "devpg: PostgreSQL server binaries not found; installing the postgresql package with apt-get")
	for _, args := range [][]string{{"update"}, {"install", "-y", "postgresql"}} {
		cmd := exec.CommandContext(ctx, aptGet, args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("devpg: apt-get %s: %w", strings.Join(args, " "), err)
		}
	}
	return FindBinaries()
}

// binDirs lists every directory holding a PostgreSQL server, preferred first.
func binDirs() []string {
	var dirs []string
	if pgConfig, err := exec.LookPath("pg_config"); err == nil {
		// Debian's /usr/bin/pg_config may come from libpq-dev alone, naming a
		// bindir without a server in it: hasServer checks.
		if out, err := exec.Command(pgConfig, "--bindir").Output(); err == nil {
			if d := strings.TrimSpace(string(out)); hasServer(d) {
				dirs = append(dirs, d)
			}
		}
	}
	debian, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(debian, func(a, b string) int { // highest version first
		return compareVersions(filepath.Base(filepath.Dir(b)), filepath.Base(filepath.Dir(a)))
	})
	for _, d := range debian {
		if hasServer(d) && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

func hasServer(dir string) bool {
	for _, name := range []string{"initdb", "postgres", "pg_ctl"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// compareVersions orders "9.6" < "15" < "16".
func compareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) || i < len(pb); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x - y
		}
	}
	return 0
}

var versionRE = regexp.MustCompile(`\(PostgreSQL\) (\d+)(\.\d+)?`)

// majorVersion is the server's major version as PG_VERSION spells it
// ("15", or "9.6" before version 10).
func majorVersion(binDir string) (string, error) {
	out, err := exec.Command(filepath.Join(binDir, "postgres"), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("devpg: postgres --version: %w", err)
	}
	m := versionRE.FindStringSubmatch(string(out))
	if m == nil {
		return "", fmt.Errorf("devpg: cannot parse %q", out)
	}
	if n, _ := strconv.Atoi(m[1]); n < 10 {
		return m[1] + m[2], nil
	}
	return m[1], nil
}

// binDirFor picks the binaries for the cluster in dataDir: the version that
// made it when it exists (a newer server cannot open an older cluster), else
// the preferred one.
func binDirFor(dataDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "PG_VERSION"))
	if err != nil {
		return FindBinaries()
	}
	want := strings.TrimSpace(string(b))
	dirs := binDirs()
	for _, d := range dirs {
		if v, err := majorVersion(d); err == nil && v == want {
			return d, nil
		}
	}
	if len(dirs) == 0 {
		return "", errNoBinaries
	}
	return "", fmt.Errorf("devpg: the cluster in %s was made by PostgreSQL %s, which is not installed (apt-get install postgresql-%s), or remove that directory to start afresh", dataDir, want, want)
}

// preloadLibraries is pg_stat_statements when the server has it (on Debian it
// ships with the server package; elsewhere it may be a separate contrib one).
func preloadLibraries(binDir string) string {
	share, lib := "", ""
	if out, err := exec.Command(filepath.Join(binDir, "pg_config"), "--sharedir", "--pkglibdir").Output(); err == nil {
		if f := strings.Fields(string(out)); len(f) == 2 {
			share, lib = f[0], f[1]
		}
	}
	if share == "" {
		v, err := majorVersion(binDir)
		if err != nil {
			return ""
		}
		share, lib = "/usr/share/postgresql/"+v, "/usr/lib/postgresql/"+v+"/lib"
	}
	for _, f := range []string{filepath.Join(share, "extension", "pg_stat_statements.control"), filepath.Join(lib, "pg_stat_statements.so")} {
		if _, err := os.Stat(f); err != nil {
			return ""
		}
	}
	return "pg_stat_statements"
}
