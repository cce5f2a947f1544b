package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/testdb"
)

// yardstickQueue is one of the plain-SQL yardsticks' queues, for the tests
// of their consumers' statement that deletes what a consumer read and
// reads its next batch (AckWithNextReceive).
type yardstickQueue interface {
	// fill makes a fresh, empty queue and sends n messages to it.
	fill(t *testing.T, n int)
	// keys lists the queue's messages in order.
	keys(t *testing.T) []int64
	// leaseOver makes the read messages keys available again, as when
	// their lease ended.
	leaseOver(t *testing.T, keys []int64)
	// ackRead is consumeHolding's step for batches of n: it deletes held
	// and reads up to n in one round trip (deleteThenRead).
	ackRead(n int) func(context.Context, []int64) (int, []int64, error)
}

// TestAckReadSkipsWhatItDeletes: a consumer's call that deletes what it
// holds and reads its next batch deletes all of it and reads the next
// messages, never one it deletes, even when the messages it holds are
// available again at the head of the queue (their lease over), and reads
// nothing when nothing else is there. (A single statement that deleted and
// read on one snapshot leased such a message and then left it in place.)
// Real pgmq's calls too, given its install file (SKIPQ_TEST_PGMQ_SQL).
func TestAckReadSkipsWhatItDeletes(t *testing.T) {
	ctx := context.Background()
	pool, err := newPool(ctx, testdb.New(t), "skipq-bench-test", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	type yardstick struct {
		name  string
		q     yardstickQueue
		batch int
	}
	cases := []yardstick{
		{"pgmq_shape", &pgmqShapeQueue{pool: pool}, 3},
		{"raw batch", &rawQueue{pool: pool}, 3},
		{"raw single", &rawQueue{pool: pool}, 1},
	}
	if os.Getenv("SKIPQ_TEST_PGMQ_SQL") != "" {
		pgmq := installPgmqForTest(t)
		cases = append(cases, yardstick{"real pgmq batch", &realPgmqQueue{pool: pgmq}, 3},
			yardstick{"real pgmq single", &realPgmqQueue{pool: pgmq}, 1})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, q := c.batch, c.q
			avail := make(chan struct{}, 1)
			consume := func(held *[]int64) int {
				t.Helper()
				acked, err := consumeHolding(ctx, held, avail, c.name, q.ackRead(n))
				if err != nil {
					t.Fatal(err)
				}
				return acked
			}
			q.fill(t, 2*n)
			all := q.keys(t)
			var held []int64 // a consumer's first call holds nothing
			if acked := consume(&held); acked != 0 || !slices.Equal(held, all[:n]) {
				t.Fatalf("the first call deleted %d and read %v, want 0 and the head %v", acked, held, all[:n])
			}
			q.leaseOver(t, held)
			if acked := consume(&held); acked != n || !slices.Equal(held, all[n:]) {
				t.Fatalf("deleted %d and read %v, want %d deleted and %v read", acked, held, n, all[n:])
			}
			if left := q.keys(t); !slices.Equal(left, all[n:]) {
				t.Fatalf("left %v, want %v", left, all[n:])
			}
			// Nothing left but the messages being deleted, available again.
			q.leaseOver(t, held)
			if acked := consume(&held); acked != n || len(held) != 0 {
				t.Fatalf("deleted %d and read %v, want %d deleted and nothing read", acked, held, n)
			}
			if left := q.keys(t); len(left) != 0 {
				t.Fatalf("left %v, want nothing", left)
			}
		})
	}
}

// scanKeys runs sql and returns its single bigint column.
func scanKeys(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ks []int64
	for rows.Next() {
		var k int64
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ks
}

type pgmqShapeQueue struct {
	pool  *pgxpool.Pool
	st    pgmqShapeStatements
	fills int
}

func (q *pgmqShapeQueue) fill(t *testing.T, n int) {
	ctx := context.Background()
	q.fills++
	st := newPgmqShapeStatements(fmt.Sprintf("ack_read_test_%d", q.fills))
	q.st = st
	if _, err := q.pool.Exec(ctx, st.create); err != nil {
		t.Fatal(err)
	}
	if _, err := q.pool.Exec(ctx, st.sendBatch, slices.Repeat([]string{`"m"`}, n)); err != nil {
		t.Fatal(err)
	}
}

func (q *pgmqShapeQueue) keys(t *testing.T) []int64 {
	return scanKeys(t, q.pool, "SELECT msg_id FROM "+q.st.table+" ORDER BY msg_id")
}

func (q *pgmqShapeQueue) leaseOver(t *testing.T, keys []int64) {
	if _, err := q.pool.Exec(context.Background(),
		"UPDATE "+q.st.table+" SET vt = clock_timestamp() - interval '1 second' WHERE msg_id = ANY($1::bigint[])", keys); err != nil {
		t.Fatal(err)
	}
}

func (q *pgmqShapeQueue) ackRead(n int) func(context.Context, []int64) (int, []int64, error) {
	return func(ctx context.Context, held []int64) (int, []int64, error) {
		return deleteThenRead(ctx, q.pool, q.st.del1, q.st.delBatch, held, nil, q.st.read, []any{n}, scanPgmqRead)
	}
}

type rawQueue struct {
	pool *pgxpool.Pool
	w    *rawWorkload
}

func (q *rawQueue) fill(t *testing.T, n int) {
	ctx := context.Background()
	q.w = &rawWorkload{pool: q.pool, batch: n, body: []byte(payload)}
	if _, err := q.pool.Exec(ctx, frozenBaselineSchema); err != nil {
		t.Fatal(err)
	}
	if err := q.pool.QueryRow(ctx, `INSERT INTO skipq.queues (tenant, name) VALUES ('bench-raw', $1) RETURNING id`,
		queueName("ack-read-test")).Scan(&q.w.queueID); err != nil {
		t.Fatal(err)
	}
	if _, err := q.w.produce(ctx, 0); err != nil {
		t.Fatal(err)
	}
}

func (q *rawQueue) keys(t *testing.T) []int64 {
	return scanKeys(t, q.pool, "SELECT sequence FROM skipq_bench.raw_messages WHERE queue_id = $1 ORDER BY sequence", q.w.queueID)
}

func (q *rawQueue) leaseOver(t *testing.T, keys []int64) {
	if _, err := q.pool.Exec(context.Background(),
		"UPDATE skipq_bench.raw_messages SET visible_at = now() - interval '1 second' WHERE queue_id = $1 AND sequence = ANY($2::bigint[])",
		q.w.queueID, keys); err != nil {
		t.Fatal(err)
	}
}

func (q *rawQueue) ackRead(n int) func(context.Context, []int64) (int, []int64, error) {
	claim, claimArgs := rawClaimBatch, []any{q.w.queueID, n}
	if n == 1 {
		claim, claimArgs = rawClaim1, []any{q.w.queueID}
	}
	return func(ctx context.Context, held []int64) (int, []int64, error) {
		return deleteThenRead(ctx, q.pool, rawAck1, rawAckBatch, held, []any{q.w.queueID}, claim, claimArgs, scanRawClaimed)
	}
}

type realPgmqQueue struct {
	pool  *pgxpool.Pool // on pgmq's database
	queue string
	fills int
}

func (q *realPgmqQueue) fill(t *testing.T, n int) {
	ctx := context.Background()
	q.fills++
	q.queue = fmt.Sprintf("ack_read_test_%d", q.fills)
	if _, err := q.pool.Exec(ctx, "SELECT pgmq.create($1)", q.queue); err != nil {
		t.Fatal(err)
	}
	if _, err := q.pool.Exec(ctx, realPgmqCalls(q.queue).sendBatch, q.queue, slices.Repeat([]string{`"m"`}, n)); err != nil {
		t.Fatal(err)
	}
}

func (q *realPgmqQueue) table() string { return pgx.Identifier{"pgmq", "q_" + q.queue}.Sanitize() }

func (q *realPgmqQueue) keys(t *testing.T) []int64 {
	return scanKeys(t, q.pool, "SELECT msg_id FROM "+q.table()+" ORDER BY msg_id")
}

func (q *realPgmqQueue) leaseOver(t *testing.T, keys []int64) {
	if _, err := q.pool.Exec(context.Background(),
		"UPDATE "+q.table()+" SET vt = clock_timestamp() - interval '1 second' WHERE msg_id = ANY($1::bigint[])", keys); err != nil {
		t.Fatal(err)
	}
}

func (q *realPgmqQueue) ackRead(n int) func(context.Context, []int64) (int, []int64, error) {
	c := realPgmqCalls(q.queue)
	return func(ctx context.Context, held []int64) (int, []int64, error) {
		return deleteThenRead(ctx, q.pool, c.del1, c.delBatch, held, c.queueArgs, c.read, []any{q.queue, n}, scanPgmqRead)
	}
}
