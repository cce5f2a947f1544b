package service

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skipq/skipq/internal/db"
)

// fromDB classifies a database error: an unreachable or restarting database
// is KindUnavailable (503, retry), anything else is an internal error.
func fromDB(op string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	if unavailable(err) {
		return &Error{Kind: KindUnavailable, Message: "the database is unavailable", Err: err}
	}
	return &Error{Kind: KindInternal, Message: op + " failed", Err: err}
}

// FromDB is fromDB for the packages beside service that reach the
// database themselves (auth, sqs's state): one classification of database
// errors for every transport to map.
func FromDB(op string, err error) error { return fromDB(op, err) }

func unavailable(err error) bool {
	// A connection that breaks mid-exchange surfaces as EOF.
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case len(pgErr.Code) == 5 && pgErr.Code[:2] == "08": // connection exception
			return true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // shutdown, crash, starting
			return true
		case db.IsPoolerStatementError(err):
			// A statement met a transaction pooler before the pool
			// switched to unnamed statements (db.NewPool); it did not run.
			return true
		case pgErr.Code == db.ReadOnlySQLState:
			// The server stopped being the primary (db.NewPool drops the
			// connection; the next one finds the primary).
			return true
		}
	}
	// A connection that an earlier failure in the same exchange closed (a
	// transaction's next statement, or its commit, after the database went
	// away) reports pgconn.ErrConnClosed, not the EOF that closed it.
	return pgconn.SafeToRetry(err) || errors.Is(err, net.ErrClosed) || errors.Is(err, pgconn.ErrConnClosed)
}
