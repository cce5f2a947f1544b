package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/node"
	"github.com/skipq/skipq/internal/worker"
)

// The frozen baseline: the raw-SQL lifecycle that the lifecycle and
// sqlconsumer scenarios measure skipq against. It is a yardstick, not a copy
// of skipq: its table and statements stay as they are when skipq's schema
// changes (a migration never touches them), so that HTTP/raw ratios of
// different releases compare. Changing them makes a new baseline; do it on
// purpose and say so in docs/PERFORMANCE.md.
//
// It is the same lifecycle as skipq's (insert a batch; one claim statement
// with FOR UPDATE SKIP LOCKED that sets the lease; delete by key), written as
// plainly as the work allows, on a table of its own with the layout skipq
// used before its flat claims (frozenBaselineSchema): one table, the claim
// walking its primary key with the visibility as a filter -- pgmq's shape,
// and the best of the plain designs measured on this machine type. It does
// what internal/queries/messages.sql does minus skipq's extras: no queue
// lookup by (tenant, name) (it knows the queue id), no per-message policy
// resolution, no ready table or timers, no triggers, no lease-token check on
// delete. Single-message statements use scalar forms; batches use arrays.
// From skipq's schema it takes only a queue id (a row of skipq.queues, tenant
// bench-raw) and skipq.message_sequence.
const (
	frozenBaselineSchema = `CREATE SCHEMA IF NOT EXISTS skipq_bench;
CREATE TABLE IF NOT EXISTS skipq_bench.raw_messages (
    queue_id          bigint      NOT NULL,
    sequence          bigint      NOT NULL DEFAULT nextval('skipq.message_sequence'),
    message_id        text        NOT NULL,
    body              bytea       NOT NULL,
    sent_at           timestamptz NOT NULL,
    visible_at        timestamptz NOT NULL,
    expires_at        timestamptz,
    receive_count     integer     NOT NULL DEFAULT 0,
    first_received_at timestamptz,
    max_receive_count integer     NOT NULL,
    lease_token       bytea,
    PRIMARY KEY (queue_id, sequence)
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01,
        autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE UNIQUE INDEX IF NOT EXISTS raw_messages_message_id_queue_key ON skipq_bench.raw_messages (message_id, queue_id);`

	rawInsert1 = `-- name: RawInsert1
INSERT INTO skipq_bench.raw_messages (queue_id, message_id, body, sent_at, visible_at, max_receive_count)
VALUES ($1, $2, $3, now(), now(), 1024)`

	rawInsertBatch = `-- name: RawInsertBatch
INSERT INTO skipq_bench.raw_messages (queue_id, message_id, body, sent_at, visible_at, max_receive_count)
SELECT $1, u.id, u.body, now(), now(), 1024
FROM unnest($2::text[], $3::bytea[]) AS u(id, body)`

	rawClaim1 = `-- name: RawClaim1
UPDATE skipq_bench.raw_messages m
SET visible_at = now() + interval '60 seconds',
    receive_count = m.receive_count + 1,
    first_received_at = coalesce(m.first_received_at, now()),
    lease_token = uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid())
WHERE m.queue_id = $1 AND m.sequence = (
    SELECT c.sequence FROM skipq_bench.raw_messages c
    WHERE c.queue_id = $1 AND c.visible_at <= now() AND c.receive_count < c.max_receive_count
      AND (c.expires_at IS NULL OR c.expires_at > now())
    ORDER BY c.sequence LIMIT 1
    FOR UPDATE SKIP LOCKED)
RETURNING m.sequence, m.message_id, m.body, m.receive_count, m.lease_token`

	rawClaimBatch = `-- name: RawClaimBatch
UPDATE skipq_bench.raw_messages m
SET visible_at = now() + interval '60 seconds',
    receive_count = m.receive_count + 1,
    first_received_at = coalesce(m.first_received_at, now()),
    lease_token = uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid())
WHERE m.queue_id = $1 AND m.sequence = ANY(ARRAY(
    SELECT c.sequence FROM skipq_bench.raw_messages c
    WHERE c.queue_id = $1 AND c.visible_at <= now() AND c.receive_count < c.max_receive_count
      AND (c.expires_at IS NULL OR c.expires_at > now())
    ORDER BY c.sequence LIMIT $2
    FOR UPDATE SKIP LOCKED))
RETURNING m.sequence, m.message_id, m.body, m.receive_count, m.lease_token`

	rawAck1 = `-- name: RawAck1
DELETE FROM skipq_bench.raw_messages WHERE queue_id = $1 AND sequence = $2`

	rawAckBatch = `-- name: RawAckBatch
DELETE FROM skipq_bench.raw_messages WHERE queue_id = $1 AND sequence = ANY($2::bigint[])`

	// rawAckClaim1 and rawAckClaimBatch are a consumer's ack and its next
	// claim in one statement and one commit (AckWithNextReceive): the
	// claims above, after deleting the messages $2 that the consumer's
	// previous claim got. Both parts run on one snapshot, taken before
	// either, in an order that is PostgreSQL's choice: the claim still
	// sees the rows being deleted, and were one of them available again
	// (its lease over) it could lease it, the delete then leaving it in
	// place (TestAckReadSkipsWhatItDeletes). The claim skips them by key.
	// The statement answers one row at least: the count the delete
	// removed, then a claimed message's columns, NULL when it claimed none.
	rawAckClaim1 = "-- name: RawAckClaim1\n" + rawAckClaimHead + `= (` + rawAckClaimAvailable + `1
        FOR UPDATE SKIP LOCKED)` + rawAckClaimAnswer

	rawAckClaimBatch = "-- name: RawAckClaimBatch\n" + rawAckClaimHead + `= ANY(ARRAY(` + rawAckClaimAvailable + `$3
        FOR UPDATE SKIP LOCKED))` + rawAckClaimAnswer

	// The parts of rawAckClaim1 and rawAckClaimBatch.
	rawAckClaimHead = `WITH acked AS (
    DELETE FROM skipq_bench.raw_messages WHERE queue_id = $1 AND sequence = ANY($2::bigint[]) RETURNING 1
), claimed AS (
    UPDATE skipq_bench.raw_messages m
    SET visible_at = now() + interval '60 seconds',
        receive_count = m.receive_count + 1,
        first_received_at = coalesce(m.first_received_at, now()),
        lease_token = uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid())
    WHERE m.queue_id = $1 AND m.sequence `
	rawAckClaimAvailable = `
        SELECT c.sequence FROM skipq_bench.raw_messages c
        WHERE c.queue_id = $1 AND c.visible_at <= now() AND c.receive_count < c.max_receive_count
          AND (c.expires_at IS NULL OR c.expires_at > now())
          AND c.sequence <> ALL($2::bigint[])
        ORDER BY c.sequence LIMIT `
	rawAckClaimAnswer = `
    RETURNING m.sequence, m.message_id, m.body, m.receive_count, m.lease_token
)
SELECT (SELECT count(*) FROM acked), c.* FROM (SELECT) AS answer LEFT JOIN claimed c ON true`

	// rawVacuum does for the baseline's table what skipq's worker does for
	// its own, on the same schedule (worker.VacuumPeriod).
	rawVacuum = `VACUUM (SKIP_LOCKED) skipq_bench.raw_messages`

	// rawApp names the baseline's connections.
	rawApp = "skipq-bench-raw"
)

// rawWorkload runs the lifecycle over a pgx pool with a connection per
// worker. A consumer that finds nothing waits for a producer's signal (or
// 100 ms): the in-process equivalent of skipq's local wake-up, so neither
// side pays for polling. Its consumers settle as shape says.
type rawWorkload struct {
	pool    *pgxpool.Pool
	queueID int64
	batch   int
	avail   chan struct{}
	body    []byte
	shape   ConsumerShape
	held    [][]int64 // consumer i's claimed sequences, deleted by its next claim (AckWithNextReceive)
}

func (w *rawWorkload) produce(ctx context.Context, _ int) (int, error) {
	var err error
	if w.batch == 1 {
		_, err = w.pool.Exec(ctx, rawInsert1, w.queueID, uuid.Must(uuid.NewV7()).String(), w.body)
	} else {
		ids := make([]string, w.batch)
		bodies := make([][]byte, w.batch)
		for i := range ids {
			ids[i] = uuid.Must(uuid.NewV7()).String()
			bodies[i] = w.body
		}
		_, err = w.pool.Exec(ctx, rawInsertBatch, w.queueID, ids, bodies)
	}
	if err != nil {
		return 0, err
	}
	announceSend(w.avail)
	return w.batch, nil
}

func (w *rawWorkload) consume(ctx context.Context, i int) (int, error) {
	if w.shape == AckWithNextReceive {
		return consumeHolding(ctx, &w.held[i], w.avail, "raw ack", func(ctx context.Context, held []int64) (int, []int64, error) {
			if w.batch == 1 {
				return ackAndRead(ctx, w.pool, scanRawClaimed, rawAckClaim1, w.queueID, held)
			}
			return ackAndRead(ctx, w.pool, scanRawClaimed, rawAckClaimBatch, w.queueID, held, w.batch)
		})
	}
	var seqs []int64
	var err error
	if w.batch == 1 {
		seqs, err = w.claim(ctx, rawClaim1, w.queueID)
	} else {
		seqs, err = w.claim(ctx, rawClaimBatch, w.queueID, w.batch)
	}
	if err != nil {
		return 0, err
	}
	if len(seqs) == 0 {
		awaitSend(ctx, w.avail)
		return 0, nil
	}
	return deleteClaimed(ctx, w.pool, "raw ack", rawAck1, rawAckBatch, seqs, w.queueID)
}

func (w *rawWorkload) settleHeld(ctx context.Context, i int) (int, error) {
	held := w.held[i]
	if len(held) == 0 {
		return 0, nil
	}
	w.held[i] = nil
	return deleteClaimed(ctx, w.pool, "raw ack", rawAck1, rawAckBatch, held, w.queueID)
}

// scanRawClaimed reads a claimed message's columns as a consumer would
// use them, after the statement's first column; a NULL sequence is no
// message.
func scanRawClaimed(rows pgx.Rows, acked *int64) (*int64, error) {
	var seq *int64
	var id *string
	var body, token []byte
	var count *int32
	err := rows.Scan(acked, &seq, &id, &body, &count, &token)
	return seq, err
}

// consumeHolding is a baseline consumer's call in the shape
// AckWithNextReceive: step deletes the keys the consumer holds and reads
// its next batch in one statement; the consumer then holds what it read.
// Like the Go client's consumer loop, only a call that carried no acks
// waits when it found nothing. It returns how many messages were deleted.
func consumeHolding(ctx context.Context, held *[]int64, avail chan struct{}, what string,
	step func(ctx context.Context, held []int64) (acked int, read []int64, err error),
) (int, error) {
	had := len(*held)
	if *held == nil {
		*held = []int64{} // an empty array: NULL would make the read's "<> ALL" skip every row
	}
	sctx := ctx
	if had > 0 {
		// Never abandoned when the run stops, as an HTTP receive that
		// carries acks is not: its acks are counted, and the keys it read
		// are held, not lost to a cancelled statement.
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
		defer cancel()
	}
	acked, read, err := step(sctx, *held)
	if err != nil {
		return 0, err
	}
	if acked != had {
		return acked, fmt.Errorf("%s deleted %d of %d held messages", what, acked, had)
	}
	*held = append((*held)[:0], read...)
	if had == 0 && len(read) == 0 {
		awaitSend(ctx, avail)
	}
	return acked, nil
}

// ackAndRead runs a statement that deletes held keys and reads the next
// batch (rawAckClaim1 and its kin): its first column is the count deleted,
// the rest a read message's, scanned by scan, which returns the message's
// key (nil: the row carries only the count).
func ackAndRead(ctx context.Context, pool *pgxpool.Pool, scan func(pgx.Rows, *int64) (*int64, error), sql string, args ...any) (int, []int64, error) {
	rows, err := pool.Query(ctx, sql, args...)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	var acked int64
	var read []int64
	for rows.Next() {
		key, err := scan(rows, &acked)
		if err != nil {
			return 0, nil, err
		}
		if key != nil {
			read = append(read, *key)
		}
	}
	return int(acked), read, rows.Err()
}

// deleteClaimed deletes what a baseline's consumer claimed (one by key, more
// by array; keyFirst are the arguments before the key) and checks that all
// of it went.
func deleteClaimed(ctx context.Context, pool *pgxpool.Pool, what, one, many string, keys []int64, keyFirst ...any) (int, error) {
	var tag pgconn.CommandTag
	var err error
	if len(keys) == 1 {
		tag, err = pool.Exec(ctx, one, append(keyFirst, keys[0])...)
	} else {
		tag, err = pool.Exec(ctx, many, append(keyFirst, keys)...)
	}
	if err != nil {
		return 0, err
	}
	if n := int(tag.RowsAffected()); n != len(keys) {
		return n, fmt.Errorf("%s deleted %d of %d claimed messages", what, n, len(keys))
	}
	return len(keys), nil
}

// claim runs a claim and reads what a consumer would use.
func (w *rawWorkload) claim(ctx context.Context, sql string, args ...any) ([]int64, error) {
	rows, err := w.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var seqs []int64
	for rows.Next() {
		var seq int64
		var id string
		var body, token []byte
		var count int32
		if err := rows.Scan(&seq, &id, &body, &count, &token); err != nil {
			return nil, err
		}
		seqs = append(seqs, seq)
	}
	return seqs, rows.Err()
}

// rawLifecycle runs one point of the raw baseline on a fresh queue (tenant
// bench-raw), its consumers in shape.
func (e *env) rawLifecycle(ctx context.Context, p Point, shape ConsumerShape) (float64, *RunStats, error) {
	return e.baselineRun(ctx, p, rawApp, func(pool *pgxpool.Pool) (workload, string, func(context.Context) error, error) {
		q := queueName(fmt.Sprintf("raw-b%d-p%d", p.Batch, p.Pairs))
		w := &rawWorkload{pool: pool, batch: p.Batch, avail: make(chan struct{}, 4*p.Pairs), body: []byte(payload),
			shape: shape, held: make([][]int64, p.Pairs)}
		if _, err := pool.Exec(ctx, frozenBaselineSchema); err != nil {
			return nil, "", nil, fmt.Errorf("raw table: %w", err)
		}
		if err := pool.QueryRow(ctx, `INSERT INTO skipq.queues (tenant, name) VALUES ('bench-raw', $1) RETURNING id`, q).Scan(&w.queueID); err != nil {
			return nil, "", nil, fmt.Errorf("raw queue: %w", err)
		}
		empty := func(ctx context.Context) error {
			if _, err := e.mon.Exec(ctx, monitorMark+`DELETE FROM skipq_bench.raw_messages WHERE queue_id = $1`, w.queueID); err != nil {
				return fmt.Errorf("empty %s: %w", q, err)
			}
			return nil
		}
		return w, rawVacuum, empty, nil
	})
}

// baselineRun runs one point of a plain-SQL baseline with its own pool,
// opened before the run starts: a connection per worker up to a node's pool
// size (16), the database connections skipq gets. More only adds
// contention: at 16 pairs, 32 connections claiming at the queue's head
// spent their time in Lock:transactionid and LWLock:BufferContent waits and
// completed fewer messages than 16. prepare makes the baseline's table and
// workload on the pool; its vacuum statement runs on skipq's worker
// schedule during the run, and its cleanup after it.
func (e *env) baselineRun(ctx context.Context, p Point, app string,
	prepare func(*pgxpool.Pool) (w workload, vacuum string, cleanup func(context.Context) error, err error),
) (float64, *RunStats, error) {
	conns := int32(min(2*p.Pairs, node.DefaultConfig().DBMaxConns))
	pool, err := newPool(ctx, e.dbURL, app, conns)
	if err != nil {
		return 0, nil, err
	}
	defer pool.Close()
	if err := warmPool(ctx, pool, int(conns)); err != nil {
		return 0, nil, err
	}
	w, vacuum, cleanup, err := prepare(pool)
	if err != nil {
		return 0, nil, err
	}
	e.checkpoint(ctx)
	runCtx, stopVacuum := context.WithCancel(ctx)
	var vacuumed sync.WaitGroup
	vacuumed.Go(func() { vacuumEvery(runCtx, pool, vacuum, worker.VacuumPeriod) })
	rate, stats, err := e.drive(ctx, w, p, nil)
	stopVacuum()
	vacuumed.Wait()
	if err != nil {
		return 0, nil, err
	}
	if err := cleanup(ctx); err != nil {
		return 0, nil, err
	}
	return rate, stats, nil
}

// vacuumEvery runs a baseline's vacuum statement on skipq's worker schedule
// until ctx ends.
func vacuumEvery(ctx context.Context, pool *pgxpool.Pool, vacuum string, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = pool.Exec(ctx, vacuum)
		}
	}
}
