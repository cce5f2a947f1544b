package sqlconsumer_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skipq/skipq/client"
	"github.com/skipq/skipq/client/sqlconsumer"
	"github.com/skipq/skipq/internal/node/nodetest"
	"github.com/skipq/skipq/internal/testdb"
)

// Received over HTTP, extended and acked in a transaction with the work; a
// second ack of the same delivery is the HTTP client's stale-receipt error
// and rolls the work back.
func TestAckTxCommitsWithTheWorkAndReportsStaleDeliveries(t *testing.T) {
	ctx := context.Background()
	dbURL := testdb.New(t)
	c, err := client.New(nodetest.Start(t, dbURL))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, "CREATE TABLE work (n int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, "jobs", client.Message{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Receive(ctx, "jobs", client.ReceiveOptions{})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %v %v", msgs, err)
	}
	h := msgs[0].ReceiptHandle
	work := func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO work VALUES (1)")
		return err
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := work(tx); err != nil {
			return err
		}
		until, err := sqlconsumer.ExtendTx(ctx, tx, h, time.Minute)
		if err != nil || time.Until(until) < 50*time.Second {
			t.Errorf("extend: %v %v", until, err)
		}
		return sqlconsumer.AckTx(ctx, tx, h)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := work(tx); err != nil {
			return err
		}
		return sqlconsumer.AckAllTx(ctx, tx, []string{h})
	})
	if !client.IsReceiptStale(err) {
		t.Fatalf("a second ack gave %v, want the stale-receipt error", err)
	}
	var rows int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM work").Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("%d work rows (%v), want the first transaction's only", rows, err)
	}
}
