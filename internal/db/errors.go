package db

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNotFound is what a :one query's "no rows" becomes at the db boundary, so
// callers above it never depend on pgx's sentinel.
var ErrNotFound = errors.New("not found")

// NotFound maps pgx.ErrNoRows to ErrNotFound and passes anything else through.
func NotFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w", ErrNotFound)
	}
	return err
}

// IsUniqueViolation reports whether err is a unique-constraint violation
// (SQLSTATE 23505) on the named constraint or index ("" = any).
func IsUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		return false
	}
	return constraint == "" || pgErr.ConstraintName == constraint
}

// IsQueueTypeMismatch reports whether err is skipq.message_requeue's refusal
// to move messages between a FIFO and a standard queue (SQLSTATE SQ409).
func IsQueueTypeMismatch(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "SQ409"
}

// IsForeignKeyViolation reports whether err is a foreign-key violation
// (SQLSTATE 23503): the row it referred to is gone.
func IsForeignKeyViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23503"
}

// IsLockNotAvailable reports whether err is a lock wait that ran out of
// lock_timeout (SQLSTATE 55P03, lock_not_available): see LockBounded.
func IsLockNotAvailable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}
