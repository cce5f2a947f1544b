package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/testdb"
)

// pgmqSQLForTest is pgmq's install file for the tests of the real pgmq
// baseline, which the project does not ship: they skip without it.
func pgmqSQLForTest(t *testing.T) string {
	t.Helper()
	path := os.Getenv("SKIPQ_TEST_PGMQ_SQL")
	if path == "" {
		t.Skip("real pgmq's tests need pgmq's SQL install file: SKIPQ_TEST_PGMQ_SQL=/path/to/pgmq.sql (docs/PERFORMANCE.md, Reproduce)")
	}
	return path
}

// installPgmqForTest installs pgmq from its install file into a database
// of its own, as the lifecycle scenario does, and returns a pool on it;
// the database is dropped when the test ends.
func installPgmqForTest(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	o, err := Options{DatabaseURL: testdb.New(t), PgmqSQL: pgmqSQLForTest(t), Scenarios: []string{Lifecycle}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	e, err := newEnv(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	in, err := e.installPgmq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.drop(ctx, e) })
	pool, err := newPool(ctx, in.url, realPgmqApp, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestRealPgmqLosesNothing installs pgmq from its install file and runs the
// baseline's producers and consumers by hand, in both consumer shapes, one
// message at a time and in batches: every message sent is deleted, each
// once (a delete that removes fewer than it read fails the call), and the
// queue is empty at the end.
func TestRealPgmqLosesNothing(t *testing.T) {
	pgmqSQLForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := installPgmqForTest(t)

	const sends = 7 // per case; each sends a batch
	for _, shape := range []ConsumerShape{AckWithNextReceive, AckSeparately} {
		for _, batch := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s batch %d", shape, batch), func(t *testing.T) {
				queue := fmt.Sprintf("loses_nothing_%s_%d", shape, batch)
				if _, err := pool.Exec(ctx, "SELECT pgmq.create($1)", queue); err != nil {
					t.Fatal(err)
				}
				const consumers = 2
				w := newPgmqWorkload(pool, realPgmqCalls(queue), "pgmq.delete", Point{Batch: batch, Pairs: consumers}, shape)
				sent := 0
				for range sends {
					n, err := w.produce(ctx, 0)
					if err != nil {
						t.Fatal(err)
					}
					sent += n
				}
				// The consumers take turns until all is deleted; each
				// turn of both deletes or holds a batch, so more turns
				// than messages mean that some were lost.
				acked := 0
				for turn := 0; acked < sent; turn++ {
					if turn > sent {
						t.Fatalf("%d turns deleted %d of %d messages", turn, acked, sent)
					}
					for i := range consumers {
						n, err := w.consume(ctx, i)
						if err != nil {
							t.Fatal(err)
						}
						acked += n
					}
				}
				for i := range consumers {
					n, err := w.settleHeld(ctx, i)
					if err != nil {
						t.Fatal(err)
					}
					acked += n
				}
				if acked != sent {
					t.Fatalf("deleted %d of %d messages sent", acked, sent)
				}
				var left int
				table := pgx.Identifier{"pgmq", "q_" + queue}.Sanitize()
				if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&left); err != nil {
					t.Fatal(err)
				}
				if left != 0 {
					t.Fatalf("%d messages left in %s", left, table)
				}
			})
		}
	}
}
