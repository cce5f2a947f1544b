package db_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/testdb"
)

// A send of 100 messages through skipq.message_insert: allocs/op are the
// node's side of it (the parameters' encoding and the rows' scan).
func BenchmarkMessageInsert100(b *testing.B) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.New(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, "SELECT skipq.send('bench', 'x'::bytea)"); err != nil {
		b.Fatal(err)
	}
	const n = 100
	body := []byte("skipq-bench-payload-0123456789abcdefghijklmnopqrstuvwxyz-0123456")
	p := db.MessageInsertParams{Tenant: "default", Queue: "bench", ServerMaxReceiveCount: 10}
	for i := range n {
		p.Keyed = append(p.Keyed, false)
		p.ClientIds = append(p.ClientIds, "")
		p.Metadatas = append(p.Metadatas, "")
		p.BodyBinaries = append(p.BodyBinaries, false)
		p.Tags = append(p.Tags, "{}")
		p.DelaySeconds = append(p.DelaySeconds, -1)
		p.ExpirationSeconds = append(p.ExpirationSeconds, -1)
		p.MaxReceiveCounts = append(p.MaxReceiveCounts, 0)
		p.DeadLetterQueues = append(p.DeadLetterQueues, "")
		p.DeadLetterQueueGiven = append(p.DeadLetterQueueGiven, false)
		p.BodyOffsets = append(p.BodyOffsets, int32(i*len(body)+1))
		p.BodyLengths = append(p.BodyLengths, int32(len(body)))
		p.BodyData = append(p.BodyData, body...)
	}
	// Each call's ids made ahead, so that allocs/op are the call's.
	ids := make([][]string, 1000)
	for i := range ids {
		for j := range n {
			ids[i] = append(ids[i], "m-"+strconv.Itoa(i)+"-"+strconv.Itoa(j))
		}
	}
	q := db.New(db.Direct(pool))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p.MessageIds = ids[i%len(ids)]
		rows, err := q.MessageInsert(ctx, p)
		if err != nil || len(rows) != n || rows[0].Outcome != db.OutcomeSent {
			b.Fatalf("%v: %d rows %+v", err, len(rows), rows)
		}
	}
}
