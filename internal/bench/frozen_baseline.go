package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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
	claim, claimArgs := rawClaimBatch, []any{w.queueID, w.batch}
	if w.batch == 1 {
		claim, claimArgs = rawClaim1, []any{w.queueID}
	}
	if w.shape == AckWithNextReceive {
		return consumeHolding(ctx, &w.held[i], w.avail, "raw ack", func(ctx context.Context, held []int64) (int, []int64, error) {
			return deleteThenRead(ctx, w.pool, rawAck1, rawAckBatch, held, []any{w.queueID}, claim, claimArgs, scanRawClaimed)
		})
	}
	rows, err := w.pool.Query(ctx, claim, claimArgs...)
	if err != nil {
		return 0, err
	}
	seqs, err := collectKeys(rows, scanRawClaimed)
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
	w.held[i] = nil
	return deleteClaimed(ctx, w.pool, "raw ack", rawAck1, rawAckBatch, held, w.queueID)
}

// scanRawClaimed reads a claimed message's columns as a consumer would
// use them and returns its key.
func scanRawClaimed(rows pgx.Rows) (int64, error) {
	var seq int64
	var id string
	var body, token []byte
	var count int32
	err := rows.Scan(&seq, &id, &body, &count, &token)
	return seq, err
}

// consumeHolding is a baseline consumer's call in the shape
// AckWithNextReceive: step deletes the keys the consumer holds and reads
// its next batch in one round trip and one commit (deleteThenRead); the
// consumer then holds what it read.
// Like the Go client's consumer loop, only a call that carried no acks
// waits when it found nothing. It returns how many messages were deleted.
func consumeHolding(ctx context.Context, held *[]int64, avail chan struct{}, what string,
	step func(ctx context.Context, held []int64) (acked int, read []int64, err error),
) (int, error) {
	had := len(*held)
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

// deleteThenRead deletes the keys a consumer holds (one by key, more by
// array; keyFirst are the arguments before the key; nothing when it holds
// none) and reads its next batch with read, in one round trip and one
// commit: the two statements in one pipeline, which PostgreSQL runs as one
// implicit transaction, as skipq's node runs an ack and the next claim.
// Two statements, not one: the read's snapshot is taken after the delete,
// so it never sees the rows being deleted. And in a single statement a
// read's FOR UPDATE SKIP LOCKED that meets a row another consumer's claim
// updated since the snapshot keeps that row locked to its commit (it
// follows the row to its newest version, which then fails the read's
// condition), while that statement's delete may wait on such a lock of
// the other consumer's: two consumers can deadlock (SQLSTATE 40P01, seen
// in 12 of 20 runs at × 16). Here only the delete waits, and before the
// read has taken any lock. It returns how many the delete removed and the
// keys read (scanKey reads a row).
func deleteThenRead(ctx context.Context, pool *pgxpool.Pool, one, many string, held []int64, keyFirst []any,
	read string, readArgs []any, scanKey func(pgx.Rows) (int64, error),
) (int, []int64, error) {
	b := &pgx.Batch{}
	if len(held) > 0 {
		sql, args := byKeys(one, many, held, keyFirst)
		b.Queue(sql, args...)
	}
	b.Queue(read, readArgs...)
	br := pool.SendBatch(ctx, b)
	var deleted int64
	if len(held) > 0 {
		tag, err := br.Exec()
		if err != nil {
			_ = br.Close()
			return 0, nil, err
		}
		deleted = tag.RowsAffected()
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return 0, nil, err
	}
	keys, err := collectKeys(rows, scanKey)
	// The commit's error, if any, shows when the batch closes.
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return 0, nil, err
	}
	return int(deleted), keys, nil
}

// collectKeys reads rows with scanKey and closes them.
func collectKeys(rows pgx.Rows, scanKey func(pgx.Rows) (int64, error)) ([]int64, error) {
	defer rows.Close()
	var keys []int64
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// byKeys is the statement that deletes keys and its arguments: one by
// key, more by array; keyFirst are the arguments before the key.
func byKeys(one, many string, keys []int64, keyFirst []any) (string, []any) {
	if len(keys) == 1 {
		return one, append(slices.Clone(keyFirst), keys[0])
	}
	return many, append(slices.Clone(keyFirst), keys)
}

// deleteClaimed deletes what a baseline's consumer claimed (byKeys;
// nothing when it claimed nothing) and checks that all of it went.
func deleteClaimed(ctx context.Context, pool *pgxpool.Pool, what, one, many string, keys []int64, keyFirst ...any) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	sql, args := byKeys(one, many, keys, keyFirst)
	tag, err := pool.Exec(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	if n := int(tag.RowsAffected()); n != len(keys) {
		return n, fmt.Errorf("%s deleted %d of %d claimed messages", what, n, len(keys))
	}
	return len(keys), nil
}

// rawLifecycle runs one point of the raw baseline on a fresh queue (tenant
// bench-raw), its consumers in shape.
func (e *env) rawLifecycle(ctx context.Context, p Point, shape ConsumerShape) (float64, *RunStats, error) {
	return e.baselineRun(ctx, e.own(), p, rawApp, func(pool *pgxpool.Pool) (workload, string, func(context.Context) error, error) {
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

// baselineRun runs one point of a plain-SQL baseline in db with its own
// pool, opened before the run starts: a connection per worker up to a
// node's pool size (16), the database connections skipq gets. More only
// adds contention: at 16 pairs, 32 connections claiming at the queue's head
// spent their time in Lock:transactionid and LWLock:BufferContent waits and
// completed fewer messages than 16. prepare makes the baseline's table and
// workload on the pool; its vacuum statement runs on skipq's worker
// schedule during the run, and its cleanup after it.
func (e *env) baselineRun(ctx context.Context, db database, p Point, app string,
	prepare func(*pgxpool.Pool) (w workload, vacuum string, cleanup func(context.Context) error, err error),
) (float64, *RunStats, error) {
	conns := int32(min(2*p.Pairs, node.DefaultConfig().DBMaxConns))
	pool, err := newPool(ctx, db.url, app, conns)
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
	rate, stats, err := e.driveIn(ctx, db.mon, w, p, nil)
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
