package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Real pgmq as the lifecycle's third baseline, when the user gives pgmq's
// own SQL install file (Options.PgmqSQL, --pgmq-sql): the project ships
// none of pgmq. The file goes into a database of its own on the bench's
// cluster, as a plain script rather than an extension, and each point runs
// a fresh queue of pgmq's (pgmq.create) through pgmq's functions, called as
// an application would call them: prepared statements over a pgx pool
// sized as the other baselines' (baselineRun), sends through pgmq.send
// (batch 1) or pgmq.send_batch, reads through pgmq.read with the others'
// 60 s visibility, deletes through pgmq.delete by id or id array, in the
// scenario's consumer shape. Its queue table is vacuumed on skipq's worker
// schedule, as the other baselines' are.
const realPgmqApp = "skipq-bench-pgmq"

// realPgmqCalls are the lifecycle's calls of pgmq's functions on queue.
func realPgmqCalls(queue string) pgmqCalls {
	return pgmqCalls{
		queueArgs: []any{queue},
		send1: `-- name: PgmqSend
SELECT * FROM pgmq.send($1::text, $2::jsonb)`,
		sendBatch: `-- name: PgmqSendBatch
SELECT * FROM pgmq.send_batch($1::text, $2::jsonb[])`,
		read: `-- name: PgmqRead
SELECT msg_id, read_ct, enqueued_at, vt, message FROM pgmq.read($1::text, 60, $2::integer)`,
		// pgmq.delete of one id answers whether it deleted it: the row
		// is there only when it did, so that the command tag counts the
		// messages deleted, as the array form's rows do.
		del1: `-- name: PgmqDelete
SELECT deleted FROM pgmq.delete($1::text, $2::bigint) AS deleted WHERE deleted`,
		delBatch: `-- name: PgmqDeleteBatch
SELECT * FROM pgmq.delete($1::text, $2::bigint[])`,
	}
}

// installPgmq makes a scratch database and runs pgmq's install file in it
// as it is, after `CREATE SCHEMA IF NOT EXISTS pgmq`: install files before
// 1.5.1 leave the schema to CREATE EXTENSION, later ones make it
// themselves when they are not run by it. drop removes the database.
func (e *env) installPgmq(ctx context.Context) (*scratchDatabase, error) {
	in, err := e.newScratchDatabase(ctx, "pgmq")
	if err != nil {
		return nil, fmt.Errorf("real pgmq: %w", err)
	}
	if err := e.loadPgmq(ctx, in.url); err != nil {
		in.drop(ctx, e)
		return nil, err
	}
	e.logf("real pgmq installed from %s into database %s", e.o.PgmqSQL, in.name)
	return in, nil
}

// loadPgmq runs the install file on a connection to the database at url,
// and makes pg_stat_statements answer there too when it answers in the
// bench's database and the role may create it (else the windows of real
// pgmq go without statements, as newEnv leaves the bench's own).
func (e *env) loadPgmq(ctx context.Context, url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.RuntimeParams["application_name"] = setupApp
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("real pgmq: %w", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS pgmq"); err != nil {
		return fmt.Errorf("real pgmq: %w", err)
	}
	// No arguments: the simple protocol, which runs a script of many
	// statements (in one transaction).
	if _, err := conn.Exec(ctx, string(e.pgmqSQL)); err != nil {
		return fmt.Errorf("real pgmq: loading %s: %w", e.o.PgmqSQL, err)
	}
	if e.pgss {
		_, _ = conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
	}
	return nil
}

// inDatabase is a connection string (a URL or keyword/value settings)
// naming database name (lower-case letters, digits and underscores)
// instead.
func inDatabase(conn, name string) (string, error) {
	if !strings.HasPrefix(conn, "postgres://") && !strings.HasPrefix(conn, "postgresql://") {
		return conn + " dbname=" + name, nil // of repeated settings the last counts
	}
	u, err := url.Parse(conn)
	if err != nil {
		return "", fmt.Errorf("bench: database URL: %w", err)
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String(), nil
}

// realPgmqLifecycle runs one point of real pgmq on a fresh queue of it,
// dropped afterwards, its consumers in shape.
func (e *env) realPgmqLifecycle(ctx context.Context, in *scratchDatabase, p Point, shape ConsumerShape) (float64, *RunStats, error) {
	queue := strings.ReplaceAll(queueName(fmt.Sprintf("b%d_p%d", p.Batch, p.Pairs)), ".", "_")
	return e.baselineRun(ctx, in.database, p, realPgmqApp, func(pool *pgxpool.Pool) (workload, string, func(context.Context) error, error) {
		if _, err := pool.Exec(ctx, "SELECT pgmq.create($1)", queue); err != nil {
			return nil, "", nil, fmt.Errorf("real pgmq queue: %w", err)
		}
		drop := func(ctx context.Context) error {
			if _, err := in.mon.Exec(ctx, monitorMark+"SELECT pgmq.drop_queue($1)", queue); err != nil {
				return fmt.Errorf("drop pgmq queue %s: %w", queue, err)
			}
			return nil
		}
		// pgmq's table of the queue: pgmq.format_table_name's "q_" and
		// the name in lower case, which it already is.
		table := pgx.Identifier{"pgmq", "q_" + queue}.Sanitize()
		return newPgmqWorkload(pool, realPgmqCalls(queue), "pgmq.delete", p, shape), "VACUUM (SKIP_LOCKED) " + table, drop, nil
	})
}

// PgmqFile is the install file real pgmq came from (Setup).
type PgmqFile struct {
	Name   string `json:"name"` // base name
	SHA256 string `json:"sha256"`
}

// pgmqFile describes the install file, nil without one.
func (e *env) pgmqFile() *PgmqFile {
	if e.pgmqSQL == nil {
		return nil
	}
	sum := sha256.Sum256(e.pgmqSQL)
	return &PgmqFile{Name: filepath.Base(e.o.PgmqSQL), SHA256: hex.EncodeToString(sum[:])}
}
