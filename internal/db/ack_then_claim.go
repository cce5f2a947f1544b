package db

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// AckThenClaim runs MessageAckByReceipt and then MessageClaim in one
// pipeline, which Postgres runs as one implicit transaction: one round trip
// and one commit for a consumer's "ack these, give me more". The claim sees
// what the ack removed (a FIFO group the ack freed may give its next
// message), and if either statement fails neither is done. setup, when not
// empty, is a statement of set_config(..., true) calls run ahead of both,
// for this transaction alone.
func AckThenClaim(ctx context.Context, pool *pgxpool.Pool, setup string, ack MessageAckByReceiptParams,
	claim MessageClaimParams) ([]MessageAckByReceiptRow, []SkipqMessage, error) {
	var acked []MessageAckByReceiptRow
	first := aheadOf{pool: pool, setup: setup, sql: messageAckByReceipt,
		args: []any{ack.QueueIds, ack.Sequences, ack.Tokens, ack.KeyIds, ack.Now},
		read: func(rows pgx.Rows) error {
			// Field by field into a slice made once (as MessageInsert's
			// rows): pgx.RowToStructByPos's reflection over each row cost
			// more than the scan.
			defer rows.Close()
			acked = make([]MessageAckByReceiptRow, 0, len(ack.QueueIds))
			for rows.Next() {
				var r MessageAckByReceiptRow
				if err := rows.Scan(&r.QueueID, &r.Sequence, &r.Token, &r.Grouped); err != nil {
					return err
				}
				acked = append(acked, r)
			}
			return rows.Err()
		}}
	claimed, err := New(first).MessageClaim(ctx, claim)
	if err != nil {
		return nil, nil, err
	}
	return acked, claimed, nil
}

// aheadOf runs each statement behind another one (sql with args, whose rows
// read takes), and behind setup when it is not empty, all in one pipeline
// and implicit transaction. Its results come only once that transaction
// committed, as piped's do.
type aheadOf struct {
	pool  *pgxpool.Pool
	setup string
	sql   string
	args  []any
	read  func(pgx.Rows) error
}

var _ DBTX = aheadOf{}

func (a aheadOf) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	rows, err := a.Query(ctx, sql, args...)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	rows.Close()
	return rows.CommandTag(), rows.Err()
}

func (a aheadOf) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return queryPooled(func() (pgx.Rows, error) { return a.query(ctx, sql, args) })
}

func (a aheadOf) query(ctx context.Context, sql string, args []any) (pgx.Rows, error) {
	b := &pgx.Batch{}
	if a.setup != "" {
		b.Queue(a.setup)
	}
	b.Queue(a.sql, a.args...)
	b.Queue(sql, args...)
	br := a.pool.SendBatch(ctx, b)
	fail := func(err error) (pgx.Rows, error) {
		_ = br.Close()
		return nil, err
	}
	if a.setup != "" {
		if _, err := br.Exec(); err != nil {
			return fail(err)
		}
	}
	first, err := br.Query()
	if err != nil {
		return fail(err)
	}
	if err := a.read(first); err != nil {
		return fail(err)
	}
	rows, err := br.Query()
	if err != nil {
		return fail(err)
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (a aheadOf) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := a.Query(ctx, sql, args...)
	return &batchRow{rows: rows, err: err}
}
