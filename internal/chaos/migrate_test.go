//go:build failover

package chaos

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skipq/skipq/internal/devpg"
	"github.com/skipq/skipq/internal/migrations"
)

// The online-migration test's ports (issue #18's range).
const (
	migratePGPort    = 22021
	migrateFirstNode = 22031
	migrateTotal     = 20_000
)

// blockingLocks are the lock modes on skipq's tables that stop sends,
// claims or settles (which take ROW EXCLUSIVE) or reads (ACCESS SHARE):
// what a CREATE INDEX without CONCURRENTLY (SHARE), a table rewrite or most
// ALTER TABLEs (ACCESS EXCLUSIVE) take. None of skipq's own statements
// takes one; CREATE INDEX CONCURRENTLY and VACUUM take SHARE UPDATE
// EXCLUSIVE, which blocks neither. Only table locks count: the row locks
// that claims and settles wait on show in pg_locks as "tuple" locks in the
// same modes.
const blockingLocksSQL = `SELECT DISTINCT a.pid::text || ' ' || l.mode || ' on ' || c.relname || ': ' || left(a.query, 120)
	FROM pg_locks l JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace
	JOIN pg_stat_activity a ON a.pid = l.pid
	WHERE n.nspname = 'skipq' AND l.granted AND l.locktype = 'relation'
	  AND l.mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')`

// TestOnlineMigration is a rolling upgrade (issue #18): two nodes built
// from the commit before the newest migration was added (the previous
// release) serve producers and consumers; a node of this tree starts and
// migrates the database to its schema while they do, then all three serve.
// Every request must succeed or answer 503 with Retry-After, nothing may be
// lost or settled twice, the old nodes must keep serving on the new schema,
// and no migration may hold a lock on skipq's tables that stops traffic
// (sampled every few milliseconds while it runs). docs/DESIGN.md has the
// rules this enforces.
func TestOnlineMigration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root, _ := filepath.Abs("../..") // the repository
	newBinary := buildSkipq(t)
	oldBinary, oldRev, newest := buildPreviousRelease(t, root)
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(root, ".skipq", "migrate")
	if err := devpg.Remove(dir); err != nil {
		t.Fatal(err)
	}
	// No crash in this test: the fast settings lose nothing here.
	pg, err := devpg.Start(ctx, devpg.Options{Dir: dir, Port: migratePGPort, Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pg.Stop() }()
	if err := pg.CreateDatabase(ctx, "skipq"); err != nil {
		t.Fatal(err)
	}
	dbURL := pg.URL("skipq")

	nodes := []*node{
		{binary: oldBinary, dbURL: dbURL, port: migrateFirstNode, logDir: dir},
		{binary: oldBinary, dbURL: dbURL, port: migrateFirstNode + 1, logDir: dir},
		{binary: newBinary, dbURL: dbURL, port: migrateFirstNode + 2, logDir: dir},
	}
	oldNodes, newNode := nodes[:2], nodes[2]
	defer func() {
		for _, n := range nodes {
			n.kill()
		}
	}()
	for _, n := range oldNodes {
		n.start(t)
	}
	// Requests go to any of the three; until the new node runs, those sent
	// to it are refused and retried, as a load balancer's would be.
	c := &cluster{nodes: nodes, http: &http.Client{Timeout: hangBound + 15*time.Second}}
	(&cluster{nodes: oldNodes, http: c.http}).waitReady(ctx, t)
	from := schemaVersion(ctx, t, dbURL)
	if from >= latest {
		t.Fatalf("the previous release (%s) is already at schema %d: nothing to upgrade", oldRev, from)
	}
	(&cluster{nodes: oldNodes, http: c.http}).createQueues(ctx, t)
	if err := installAudit(ctx, dbURL); err != nil {
		t.Fatalf("audit: %v", err)
	}

	load := &keyedLoad{c: c, book: newLedger(), drained: make(chan struct{})}
	var work sync.WaitGroup
	// Paced, so that the load spans the migration.
	load.start(ctx, &work, migrateTotal, 20*time.Millisecond)

	for load.sentN.Load() < migrateTotal/5 && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	// The upgrade: a node of this tree starts, which migrates.
	sampling, stopSampling := context.WithCancel(ctx)
	blocking := make(chan []string, 1)
	go func() { blocking <- sampleBlockingLocks(sampling, dbURL) }()
	t.Logf("upgrade: starting a node at schema %d on the database at %d (%d sent)", latest, from, load.sentN.Load())
	migrateStart := time.Now()
	newNode.start(t)
	// Bounded apart from the run: a node that cannot migrate exits at once,
	// and its log (dir/node-<port>.log) says why.
	readyCtx, readyCancel := context.WithTimeout(ctx, 90*time.Second)
	(&cluster{nodes: []*node{newNode}, http: c.http}).waitReady(readyCtx, t)
	readyCancel()
	migrated := time.Since(migrateStart)
	stopSampling()
	locks := <-blocking
	to := schemaVersion(ctx, t, dbURL)

	// The previous release's nodes serve on the new schema.
	served := 0
	for _, n := range oldNodes {
		if load.send(ctx, n, []string{fmt.Sprintf("after-%d", n.port)}) {
			served++
		}
	}

	load.drain(ctx, t, dbURL, &work, migrateTotal+served)
	book := load.book
	v, sentIDs, _ := auditVerdict(t, dbURL, &load.sent, book)
	fmt.Printf("online-migration: previous_release=%s newest=%s schema=%d->%d migrate_ms=%d sent=%d acked=%d lost=%d double_acked=%d"+
		" acked_then_redelivered=%d errors=%d server_errors=%d hangs=%d blocking_locks=%d old_nodes_serving_after=%d/%d audit_mismatch=%d\n",
		oldRev, newest, from, to, migrated.Milliseconds(), len(sentIDs), v.acked, v.lost, v.doubleAcked,
		ackedThenRedelivered(book), c.unavailable.Load(), c.serverErrors.Load(), c.hangs.Load(), len(locks), served, len(oldNodes), v.auditMismatch)
	for _, s := range c.samples {
		t.Log("failure:", s)
	}
	for _, s := range v.samples {
		t.Log("verdict:", s)
	}
	for _, s := range locks {
		t.Log("blocking lock:", s)
	}
	switch {
	case to != latest:
		t.Fatalf("the database is at schema %d after the upgrade, want %d", to, latest)
	case v.lost > 0:
		t.Fatalf("%d messages lost, e.g. %v", v.lost, v.lostSample)
	case v.doubleAcked > 0 || ackedThenRedelivered(book) > 0:
		t.Fatalf("%d messages acked twice, %d delivered after an ack", v.doubleAcked, ackedThenRedelivered(book))
	case v.auditMismatch > 0:
		t.Fatalf("%d settles disagree with the audit (see the log)", v.auditMismatch)
	case c.serverErrors.Load() > 0:
		t.Fatalf("%d answers were server errors (5xx other than 503 with Retry-After); the nodes' logs are %s/node-*.log", c.serverErrors.Load(), dir)
	case c.hangs.Load() > 0:
		t.Fatalf("%d requests hung", c.hangs.Load())
	case len(locks) > 0:
		t.Fatalf("a migration held %d locks that stop traffic on skipq's tables (see the log): docs/DESIGN.md, \"Online migrations\"", len(locks))
	case served != len(oldNodes):
		t.Fatalf("only %d of %d previous-release nodes served a send on the new schema", served, len(oldNodes))
	}
}

// buildPreviousRelease builds skipq as it was just before the newest
// migration of this tree was first added: the parent of the commit that
// added it, under whatever name (HEAD when the migration is not committed
// yet), from git archive. It
// returns the binary, that revision and the newest migration's name.
func buildPreviousRelease(t *testing.T, root string) (binary, rev, newest string) {
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("migrations: %v", err)
	}
	slices.Sort(names)
	newest = names[len(names)-1]
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %s: %v (this test needs the repository's history)", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	if git("rev-parse", "--is-shallow-repository") == "true" {
		t.Fatal("the repository is a shallow clone: this test builds the previous release from history (git fetch --unshallow)")
	}
	// The commit that brought the newest migration to this branch: along
	// the first parents (-m --first-parent: a migration merged from a
	// helper branch arrives with the merge, whose first parent is the
	// release before it), across renames with the text unchanged (--follow
	// -M100%: the move under internal/; git's default similarity took a new
	// migration for a generated file it removed and resembled).
	rev = "HEAD"
	if added := strings.Fields(git("log", "-m", "--first-parent", "--follow", "-M100%", "--diff-filter=A", "--format=%H", "--", "internal/migrations/"+newest)); len(added) > 0 {
		rev = added[len(added)-1] + "^"
	}
	// SKIPQ_PREVIOUS_RELEASE names another revision to upgrade from: the
	// release actually running, when several migrations came after it.
	if r := os.Getenv("SKIPQ_PREVIOUS_RELEASE"); r != "" {
		rev = r
	}
	rev = git("rev-parse", "--short", rev)
	// Kept between runs (a revision's binary never changes).
	binary = filepath.Join(root, ".skipq", "previous", "skipq-"+rev)
	if _, err := os.Stat(binary); err == nil {
		return binary, rev, newest
	}
	src := filepath.Join(t.TempDir(), "previous")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.Command("sh", "-c", `git archive --format=tar "$1" | tar -x -C "$2"`, "sh", rev, src)
	archive.Dir = root
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", rev, err, out)
	}
	build := exec.Command("go", "build", "-o", binary+".tmp", "./cmd/skipq")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", rev, err, out)
	}
	if err := os.Rename(binary+".tmp", binary); err != nil {
		t.Fatal(err)
	}
	return binary, rev, newest
}

// sampleBlockingLocks polls pg_locks until ctx ends and returns every
// traffic-stopping lock it saw on skipq's tables.
func sampleBlockingLocks(ctx context.Context, dbURL string) []string {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return []string{"cannot sample: " + err.Error()}
	}
	defer conn.Close(context.Background())
	var seen []string
	for ctx.Err() == nil {
		rows, err := conn.Query(ctx, blockingLocksSQL)
		if err != nil {
			break
		}
		found, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err == nil {
			for _, s := range found {
				if !slices.Contains(seen, s) {
					seen = append(seen, s)
				}
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return seen
}

func schemaVersion(ctx context.Context, t *testing.T, dbURL string) int64 {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var v int64
	if err := conn.QueryRow(ctx, "SELECT max(version_id) FROM skipq_goose_version WHERE is_applied").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
