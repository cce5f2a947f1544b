package devpg

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// BaseBackup makes the data directory of a streaming standby of c under
// opts.Dir, for failover tests: pg_basebackup over TCP (c must listen on
// it) with -R (standby.signal and a primary_conninfo naming c) and -C -S
// slot (a replication slot on c, so c keeps the WAL the standby has yet to
// receive), after an immediate checkpoint (the default, spread one takes
// minutes on an idle server). Start the standby with Start(ctx, opts); give it
// cluster_name=<name> in opts.Settings to be named in c's
// synchronous_standby_names. initdb's trust lines already let local TCP
// clients replicate.
func (c *Cluster) BaseBackup(ctx context.Context, opts Options, slot string) error {
	if !c.tcp {
		return fmt.Errorf("devpg: a base backup needs the primary on TCP")
	}
	l, binDir, unlock, err := setUp(ctx, opts)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(l.data, "PG_VERSION")); err == nil {
		return fmt.Errorf("devpg: %s already holds a cluster", l.data)
	}
	// pg_basebackup fills an empty directory that the server's user owns.
	if err := l.ownedDir(l.data, 0o700, true); err != nil {
		return err
	}
	cmd := l.command(ctx, filepath.Join(binDir, "pg_basebackup"), "-h", "127.0.0.1", "-p", strconv.Itoa(c.port),
		"-U", "postgres", "-D", l.data, "-X", "stream", "-R", "-C", "-S", slot, "--checkpoint=fast")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("devpg: pg_basebackup: %w\n%s", err, out)
	}
	return nil
}

// Promote ends recovery on a standby and waits (up to a minute) until it
// takes writes: what pg_ctl promote -w does.
func (c *Cluster) Promote(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("devpg: %w", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var promoted bool
	if err := conn.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&promoted); err != nil {
		return fmt.Errorf("devpg: promote: %w", err)
	}
	if !promoted {
		return fmt.Errorf("devpg: the standby did not finish promoting within 60 s")
	}
	return nil
}

// Remove deletes the cluster under dir, wherever its home was put (a
// relocated home too), so that a test starts from nothing. The server must
// be stopped.
func Remove(dir string) error {
	l, err := resolveLayout(Options{Dir: dir})
	if err != nil {
		return err
	}
	for _, p := range []string{l.home, l.sock, l.dir} {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("devpg: %w", err)
		}
	}
	return nil
}
