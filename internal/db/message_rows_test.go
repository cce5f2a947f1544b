package db_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/testdb"
)

// scanMessages reads what pgx's Scan reads from the same rows, field by
// field: over the extended protocol (text and jsonb as text, the rest
// binary) and the simple one (all text), with every nullable column both
// NULL and not, empty and binary bodies, a body larger than an arena block,
// and rows past the count it was told to expect.
func TestScanMessagesReadsWhatScanReads(t *testing.T) {
	ctx := context.Background()
	url := testdb.New(t)
	setup, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(setup.Close)
	const n = 40
	if _, err := setup.Exec(ctx, `SELECT skipq.send('rows', convert_to('body ' || i, 'UTF8'), metadata => 'meta ' || i,
		tags => jsonb_build_object('k', i::text), client_id => 'client ' || i) FROM generate_series(1, $1) i`, n); err != nil {
		t.Fatal(err)
	}
	// Every other row with each nullable column set, a few bodies empty,
	// binary or large.
	if _, err := setup.Exec(ctx, `UPDATE skipq.messages SET
		delayed_to = CASE WHEN sequence % 2 = 0 THEN sent_at + interval '1 hour' END,
		expires_at = CASE WHEN sequence % 2 = 1 THEN sent_at + interval '2 hours' ELSE NULL END,
		first_received_at = CASE WHEN sequence % 2 = 0 THEN sent_at + interval '1.5 seconds' END,
		dead_lettered_at = CASE WHEN sequence % 2 = 1 THEN sent_at + interval '3 seconds' END,
		re_routed_from = CASE WHEN sequence % 2 = 0 THEN 'from ' || sequence END,
		lease_token = CASE WHEN sequence % 2 = 1 THEN sha256(sequence::text::bytea) END,
		group_id = CASE WHEN sequence % 2 = 0 THEN 'g' || sequence % 3 END,
		dead_letter_queue = CASE WHEN sequence % 2 = 1 THEN 'dlq' ELSE '' END,
		receive_count = sequence % 5, ready = sequence % 2 = 0,
		body = CASE sequence % 7 WHEN 0 THEN '\x'::bytea WHEN 3 THEN '\x00ff10'::bytea
			WHEN 5 THEN convert_to(repeat('x', 70000), 'UTF8') ELSE body END,
		body_binary = sequence % 7 = 3`); err != nil {
		t.Fatal(err)
	}
	query := "SELECT " + db.MessageColumns + " FROM skipq.messages ORDER BY sequence"
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.DefaultQueryExecMode = mode
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		want := scanEach(t, pool, query)
		if len(want) != n {
			t.Fatalf("%s: %d rows, want %d", mode, len(want), n)
		}
		for _, hint := range []int{1, n, 1000} {
			rows, err := pool.Query(ctx, query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := db.ScanMessages(rows, hint)
			if err != nil {
				t.Fatalf("%s, hint %d: %v", mode, hint, err)
			}
			if len(got) != len(want) {
				t.Fatalf("%s, hint %d: %d rows, want %d", mode, hint, len(got), len(want))
			}
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("%s, hint %d, row %d:\n got %+v\nwant %+v", mode, hint, i, got[i], want[i])
				}
			}
		}
	}
}

// A result whose columns are not skipq.messages' is refused, not misread.
func TestScanMessagesRefusesOtherColumns(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, "SELECT skipq.send('rows', 'x'::bytea)"); err != nil {
		t.Fatal(err)
	}
	swapped := strings.Replace(db.MessageColumns, "queue_id, sequence, message_id", "queue_id, message_id, sequence", 1)
	rows, err := pool.Query(ctx, "SELECT "+swapped+" FROM skipq.messages")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := db.ScanMessages(rows, 1); err == nil || !strings.Contains(err.Error(), "column message_id") {
		t.Fatalf("%d rows with the columns swapped, error %v", len(got), err)
	}
}

// scanEach reads query's rows with pgx's Scan, as sqlc's code did.
func scanEach(t *testing.T, pool *pgxpool.Pool, query string) []db.SkipqMessage {
	t.Helper()
	rows, err := pool.Query(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (db.SkipqMessage, error) {
		var m db.SkipqMessage
		err := row.Scan(&m.QueueID, &m.Sequence, &m.MessageID, &m.ClientID, &m.Metadata, &m.Body, &m.BodyBinary,
			&m.Tags, &m.SentAt, &m.VisibleAt, &m.DelayedTo, &m.ExpiresAt, &m.ReceiveCount, &m.FirstReceivedAt,
			&m.MaxReceiveCount, &m.DeadLetterQueue, &m.ReRoutedFrom, &m.DeadLetteredAt, &m.LeaseToken, &m.Ready, &m.GroupID)
		return m, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
