package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The pgmq-shaped baseline: the lifecycle in the shapes pgmq uses, written by
// the project as well as it can, so that the lifecycle scenario holds skipq
// to a yardstick pgmq itself reaches. The frozen raw baseline lost to real
// pgmq by up to 2.3× at batch 100 on this machine type (POSTGRES-QUEUE-FACTS
// in docs/PERFORMANCE.md); a yardstick that loses to the competitor says
// nothing about skipq against it.
//
// pgmq's shapes, kept as they are:
//   - one table per queue (msg_id an identity primary key, read_ct,
//     enqueued_at, vt, message jsonb, headers jsonb) with pgmq's index on vt;
//   - send: an INSERT of vt = clock_timestamp() (a batch through unnest);
//   - read: one statement that selects the ids whose vt has come, in msg_id
//     order, FOR UPDATE SKIP LOCKED, and sets their vt and read_ct;
//   - delete: by id, or by an id array.
//
// What the project adds over pgmq's own functions: the statements are sent
// directly (pgx prepares and caches them), not built by PL/pgSQL's format()
// and EXECUTE on every call, and the table is vacuumed on skipq's worker
// schedule, as the raw baseline's is. Prepared, the read is written
// `msg_id = ANY(ARRAY(SELECT …))` rather than pgmq's `IN (SELECT …)`:
// pgmq's EXECUTE plans each call afresh, while a prepared statement goes to a
// generic plan after five calls, and the generic plan of the IN form is a
// hash semi join over a sequential scan of the whole table (checked with
// plan_cache_mode = force_generic_plan); the array form has one plan, the
// primary key probed by the ids. Like the raw baseline it is a
// yardstick: change it only on purpose, and say so in docs/PERFORMANCE.md.
const pgmqShapeApp = "skipq-bench-pgmq-shape"

// pgmqCalls are the lifecycle's statements on one pgmq queue: pgmq_shape's
// own statements on its table, or calls of real pgmq's functions
// (real_pgmq.go). Each takes queueArgs first (real pgmq's queue name; none
// for pgmq_shape, whose statements name their table); send1 then takes a
// message, sendBatch an array of them, read the most messages to read, and
// del1 and delBatch an id and an id array. A read returns msg_id, read_ct,
// enqueued_at, vt and message (scanPgmqRead); a delete, a row or a tag per
// message it deleted.
type pgmqCalls struct {
	queueArgs                              []any
	send1, sendBatch, read, del1, delBatch string
}

// pgmqShapeStatements are one pgmq-shaped queue's table and statements.
type pgmqShapeStatements struct {
	table, create string // the table: schema-qualified and quoted; its DDL
	pgmqCalls
}

func newPgmqShapeStatements(name string) pgmqShapeStatements {
	t := pgx.Identifier{"skipq_bench", name}.Sanitize()
	vtIndex := pgx.Identifier{name + "_vt_idx"}.Sanitize()
	return pgmqShapeStatements{
		table: t,
		create: `CREATE SCHEMA IF NOT EXISTS skipq_bench;
CREATE TABLE ` + t + ` (
    msg_id      bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY,
    read_ct     integer NOT NULL DEFAULT 0,
    enqueued_at timestamptz NOT NULL DEFAULT now(),
    vt          timestamptz NOT NULL,
    message     jsonb,
    headers     jsonb
);
CREATE INDEX ` + vtIndex + ` ON ` + t + ` (vt ASC);`,
		pgmqCalls: pgmqCalls{
			send1: `-- name: PgmqShapeSend1
INSERT INTO ` + t + ` (vt, message) VALUES (clock_timestamp(), $1::jsonb) RETURNING msg_id`,
			sendBatch: `-- name: PgmqShapeSendBatch
INSERT INTO ` + t + ` (vt, message) SELECT clock_timestamp(), unnest($1::jsonb[]) RETURNING msg_id`,
			read: `-- name: PgmqShapeRead
UPDATE ` + t + ` m
SET vt = clock_timestamp() + interval '60 seconds', read_ct = m.read_ct + 1
WHERE m.msg_id = ANY(ARRAY(
    SELECT msg_id FROM ` + t + `
    WHERE vt <= clock_timestamp()
    ORDER BY msg_id ASC
    LIMIT $1
    FOR UPDATE SKIP LOCKED))
RETURNING m.msg_id, m.read_ct, m.enqueued_at, m.vt, m.message`,
			del1: `-- name: PgmqShapeDelete1
DELETE FROM ` + t + ` WHERE msg_id = $1`,
			delBatch: `-- name: PgmqShapeDeleteBatch
DELETE FROM ` + t + ` WHERE msg_id = ANY($1::bigint[])`,
		},
	}
}

// pgmqWorkload runs the lifecycle on one pgmq queue through calls (the
// pgmq-shaped baseline's or real pgmq's); consumers that find nothing wait
// as the raw baseline's do, and settle as shape says.
type pgmqWorkload struct {
	pool     *pgxpool.Pool
	calls    pgmqCalls
	what     string // the delete, for errors
	batch    int
	avail    chan struct{}
	sendArgs []any // queueArgs, then one message (a JSON string of the bench's payload) or a batch of them
	readArgs []any // queueArgs, then the batch
	shape    ConsumerShape
	held     [][]int64 // consumer i's read ids, deleted by its next read (AckWithNextReceive)
}

func newPgmqWorkload(pool *pgxpool.Pool, calls pgmqCalls, what string, p Point, shape ConsumerShape) *pgmqWorkload {
	message := `"` + payload + `"`
	var sent any = message
	if p.Batch > 1 {
		sent = slices.Repeat([]string{message}, p.Batch)
	}
	return &pgmqWorkload{pool: pool, calls: calls, what: what, batch: p.Batch, avail: make(chan struct{}, 4*p.Pairs),
		sendArgs: append(slices.Clone(calls.queueArgs), sent), readArgs: append(slices.Clone(calls.queueArgs), p.Batch),
		shape: shape, held: make([][]int64, p.Pairs)}
}

func (w *pgmqWorkload) produce(ctx context.Context, _ int) (int, error) {
	send := w.calls.sendBatch
	if w.batch == 1 {
		send = w.calls.send1
	}
	if _, err := w.pool.Exec(ctx, send, w.sendArgs...); err != nil {
		return 0, err
	}
	announceSend(w.avail)
	return w.batch, nil
}

func (w *pgmqWorkload) consume(ctx context.Context, i int) (int, error) {
	c := w.calls
	if w.shape == AckWithNextReceive {
		return consumeHolding(ctx, &w.held[i], w.avail, w.what, func(ctx context.Context, held []int64) (int, []int64, error) {
			return deleteThenRead(ctx, w.pool, c.del1, c.delBatch, held, c.queueArgs, c.read, w.readArgs, scanPgmqRead)
		})
	}
	rows, err := w.pool.Query(ctx, c.read, w.readArgs...)
	if err != nil {
		return 0, err
	}
	ids, err := collectKeys(rows, scanPgmqRead)
	if err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		awaitSend(ctx, w.avail)
		return 0, nil
	}
	return deleteClaimed(ctx, w.pool, w.what, c.del1, c.delBatch, ids, c.queueArgs...)
}

func (w *pgmqWorkload) settleHeld(ctx context.Context, i int) (int, error) {
	held := w.held[i]
	w.held[i] = nil
	return deleteClaimed(ctx, w.pool, w.what, w.calls.del1, w.calls.delBatch, held, w.calls.queueArgs...)
}

// scanPgmqRead reads a read message's columns as a consumer would use them
// and returns its id.
func scanPgmqRead(rows pgx.Rows) (int64, error) {
	var id int64
	var readCt int32
	var enqueuedAt, vt time.Time
	var message []byte
	err := rows.Scan(&id, &readCt, &enqueuedAt, &vt, &message)
	return id, err
}

// pgmqShapeLifecycle runs one point of the pgmq-shaped baseline on a fresh
// table of its own, dropped afterwards, its consumers in shape.
func (e *env) pgmqShapeLifecycle(ctx context.Context, p Point, shape ConsumerShape) (float64, *RunStats, error) {
	name := strings.ReplaceAll(queueName(fmt.Sprintf("pgmq_q_b%d_p%d", p.Batch, p.Pairs)), ".", "_")
	st := newPgmqShapeStatements(name)
	return e.baselineRun(ctx, e.own(), p, pgmqShapeApp, func(pool *pgxpool.Pool) (workload, string, func(context.Context) error, error) {
		if _, err := pool.Exec(ctx, st.create); err != nil {
			return nil, "", nil, fmt.Errorf("pgmq-shaped table: %w", err)
		}
		drop := func(ctx context.Context) error {
			if _, err := e.mon.Exec(ctx, monitorMark+"DROP TABLE "+st.table); err != nil {
				return fmt.Errorf("drop %s: %w", st.table, err)
			}
			return nil
		}
		return newPgmqWorkload(pool, st.pgmqCalls, "pgmq-shaped delete", p, shape), "VACUUM (SKIP_LOCKED) " + st.table, drop, nil
	})
}
