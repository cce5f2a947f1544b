package db_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/testdb"
)

// A peek of 100 messages through skipq.message_claim: the statement and
// the rows' scan, which a claim of 100 shares (a peek changes nothing, so
// every call reads the same rows). allocs/op and cpu-ns/op (this
// process's CPU time, user and system, PostgreSQL's not included) are the
// node's side of it; ns/op is mostly the server's.
func BenchmarkMessageClaim100(b *testing.B) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.New(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	const n = 100
	if _, err := pool.Exec(ctx, `SELECT skipq.send('bench', convert_to(repeat('skipq-bench-payload ', 5) || i, 'UTF8'),
		tags => '{"k": "v"}', expiration_seconds => 3600, message_id => 'm-' || i) FROM generate_series(1, $1) i`, n); err != nil {
		b.Fatal(err)
	}
	p := db.MessageClaimParams{Tenant: "default", Queue: "bench", MaxMessages: n, MaxPerGroup: 1,
		MaxResponseBytes: 1 << 20, MessageOverhead: 700, Mode: "peek"}
	q := db.New(db.Direct(pool))
	b.ReportAllocs()
	start := processCPU(b)
	for b.Loop() {
		rows, err := q.MessageClaim(ctx, p)
		if err != nil || len(rows) != n || rows[0].ExpiresAt == nil {
			b.Fatalf("%v: %d rows", err, len(rows))
		}
	}
	b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time this process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
