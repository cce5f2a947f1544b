// Package sqlconsumer settles skipq deliveries inside an application's own
// pgx transaction, so that the work and the ack commit together or not at
// all (docs/SQL.md, "Consuming in SQL"). Receive with the HTTP client, then:
//
//	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		if _, err := tx.Exec(ctx, "INSERT INTO shipments (order_id) VALUES ($1)", orderID); err != nil {
//			return err
//		}
//		return sqlconsumer.AckTx(ctx, tx, m.ReceiptHandle)
//	})
//	if client.IsReceiptStale(err) {
//		// The delivery was no longer current: the work was rolled back.
//	}
//
// It is a package of its own so that the HTTP client does not depend on a
// database driver.
package sqlconsumer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skipq/skipq/client"
)

// Tx is what the functions need of a transaction: a pgx.Tx (or, for
// autocommit, a *pgx.Conn or a *pgxpool.Pool).
type Tx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// AckTx acks the delivery in tx. A delivery that is no longer current (or
// a forged handle) gives an error for which client.IsReceiptStale is true;
// tx is then aborted and must be rolled back.
func AckTx(ctx context.Context, tx Tx, handle string) error {
	_, err := tx.Exec(ctx, "SELECT skipq.ack($1)", handle)
	return stale(err)
}

// AckAllTx acks every delivery in tx, or none: one handle that settles
// nothing aborts tx (client.IsReceiptStale).
func AckAllTx(ctx context.Context, tx Tx, handles []string) error {
	_, err := tx.Exec(ctx, "SELECT skipq.ack($1::text[])", handles)
	return stale(err)
}

// ExtendTx makes the delivery's lease end d from now (whole seconds, 1 s to
// 12 h) and returns the new end; the handle stays valid.
func ExtendTx(ctx context.Context, tx Tx, handle string, d time.Duration) (time.Time, error) {
	var until time.Time
	err := tx.QueryRow(ctx, "SELECT skipq.set_visibility($1, $2)", handle, int(d/time.Second)).Scan(&until)
	return until, stale(err)
}

// stale turns SQLSTATE SQ404 into the HTTP client's receipt_stale error,
// keeping the database's error in the chain.
func stale(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "SQ404" {
		return err
	}
	return fmt.Errorf("%w: %w", &client.Error{Status: http.StatusNotFound, Code: client.CodeReceiptStale,
		Message: "the receipt handle is not the message's current delivery"}, err)
}
