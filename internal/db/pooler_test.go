package db_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/testdb"
)

// A node pointed at PgBouncer in transaction mode with a plain URL (no
// default_query_exec_mode) must work: pgx's named prepared statements do
// not survive a transaction there, and two client connections meet each
// other's statements on a shared server connection.
func TestPoolBehindTransactionPoolerWithPlainURL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := testdb.ThroughPgBouncer(t, testdb.New(t))
	pool, err := db.NewPool(ctx, url, db.PoolOptions{MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	planned, direct := db.Planned(pool), db.Direct(pool)
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				var n int
				q := fmt.Sprintf("SELECT %d + $1::int", i%5)
				if err := planned.QueryRow(ctx, q, w).Scan(&n); err != nil {
					errs <- fmt.Errorf("planned: %w", err)
				}
				if err := direct.QueryRow(ctx, q, w).Scan(&n); err != nil {
					errs <- fmt.Errorf("direct: %w", err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n < 5 {
			t.Error(err)
		}
		n++
	}
	if n > 0 {
		t.Errorf("%d of 800 statements failed", n)
	}
}

// On a direct connection the pool keeps pgx's prepared statements.
func TestPoolKeepsPreparedStatementsOnDirectConnections(t *testing.T) {
	ctx := context.Background()
	pool, err := db.NewPool(ctx, testdb.New(t), db.PoolOptions{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var prepared int
	for range 2 {
		if err := db.Direct(pool).QueryRow(ctx,
			"SELECT count(*) FROM pg_prepared_statements WHERE NOT from_sql").Scan(&prepared); err != nil {
			t.Fatal(err)
		}
	}
	if prepared == 0 {
		t.Fatal("no prepared statement on the connection: the pool switched to unnamed statements on a direct connection")
	}
}
