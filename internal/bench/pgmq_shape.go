package bench

import (
	"context"
	"fmt"
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

// pgmqShapeStatements are one queue's table and statements.
type pgmqShapeStatements struct {
	table                                          string // schema-qualified, quoted
	create, send1, sendBatch, read, del1, delBatch string
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
	}
}

// pgmqShapeWorkload runs the lifecycle on one pgmq-shaped queue; consumers
// that find nothing wait as the raw baseline's do, and settle as shape
// says.
type pgmqShapeWorkload struct {
	pool    *pgxpool.Pool
	st      pgmqShapeStatements
	batch   int
	avail   chan struct{}
	message string   // one message: a JSON string of the bench's payload
	batchOf []string // batch of them
	shape   ConsumerShape
	held    [][]int64 // consumer i's read ids, deleted by its next read (AckWithNextReceive)
}

func (w *pgmqShapeWorkload) produce(ctx context.Context, _ int) (int, error) {
	var err error
	if w.batch == 1 {
		_, err = w.pool.Exec(ctx, w.st.send1, w.message)
	} else {
		_, err = w.pool.Exec(ctx, w.st.sendBatch, w.batchOf)
	}
	if err != nil {
		return 0, err
	}
	announceSend(w.avail)
	return w.batch, nil
}

func (w *pgmqShapeWorkload) consume(ctx context.Context, i int) (int, error) {
	if w.shape == AckWithNextReceive {
		return consumeHolding(ctx, &w.held[i], w.avail, "pgmq-shaped delete", func(ctx context.Context, held []int64) (int, []int64, error) {
			return deleteThenRead(ctx, w.pool, w.st.del1, w.st.delBatch, held, nil, w.st.read, []any{w.batch}, scanPgmqShapeRead)
		})
	}
	rows, err := w.pool.Query(ctx, w.st.read, w.batch)
	if err != nil {
		return 0, err
	}
	ids, err := collectKeys(rows, scanPgmqShapeRead)
	if err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		awaitSend(ctx, w.avail)
		return 0, nil
	}
	return deleteClaimed(ctx, w.pool, "pgmq-shaped delete", w.st.del1, w.st.delBatch, ids)
}

func (w *pgmqShapeWorkload) settleHeld(ctx context.Context, i int) (int, error) {
	held := w.held[i]
	w.held[i] = nil
	return deleteClaimed(ctx, w.pool, "pgmq-shaped delete", w.st.del1, w.st.delBatch, held)
}

// scanPgmqShapeRead reads a read message's columns as a consumer would
// use them and returns its id.
func scanPgmqShapeRead(rows pgx.Rows) (int64, error) {
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
	return e.baselineRun(ctx, p, pgmqShapeApp, func(pool *pgxpool.Pool) (workload, string, func(context.Context) error, error) {
		if _, err := pool.Exec(ctx, st.create); err != nil {
			return nil, "", nil, fmt.Errorf("pgmq-shaped table: %w", err)
		}
		message := `"` + payload + `"`
		batchOf := make([]string, p.Batch)
		for i := range batchOf {
			batchOf[i] = message
		}
		w := &pgmqShapeWorkload{pool: pool, st: st, batch: p.Batch, avail: make(chan struct{}, 4*p.Pairs),
			message: message, batchOf: batchOf, shape: shape, held: make([][]int64, p.Pairs)}
		drop := func(ctx context.Context) error {
			if _, err := e.mon.Exec(ctx, monitorMark+"DROP TABLE "+st.table); err != nil {
				return fmt.Errorf("drop %s: %w", st.table, err)
			}
			return nil
		}
		return w, "VACUUM (SKIP_LOCKED) " + st.table, drop, nil
	})
}
