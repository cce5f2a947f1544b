package service

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// A transaction whose connection broke mid-exchange fails its next
// statement with pgconn.ErrConnClosed (not retry-safe, and not the EOF that
// closed it): that is the database going away, a 503, not a 500. Found by
// make chaos: nacks and requeues answered 500 "nack failed: conn closed"
// during a PostgreSQL crash.
func TestConnClosedIsUnavailable(t *testing.T) {
	err := fmt.Errorf("commit: %w", pgconn.ErrConnClosed)
	var e *Error
	if !errors.As(fromDB("nack", err), &e) || e.Kind != KindUnavailable {
		t.Fatalf("fromDB(%v) = %v, want KindUnavailable", err, fromDB("nack", err))
	}
}

// A backend terminated by an administrator (57P01, what pg_terminate_backend
// sends), a crash (57P02) and a database still starting (57P03) are the
// database going away too: 503, never a 500 or, for a settle, a stale
// receipt.
func TestShutdownCodesAreUnavailable(t *testing.T) {
	for _, code := range []string{"57P01", "57P02", "57P03", "08006"} {
		err := fmt.Errorf("ack: %w", &pgconn.PgError{Code: code})
		var e *Error
		if !errors.As(fromDB("ack", err), &e) || e.Kind != KindUnavailable {
			t.Errorf("SQLSTATE %s: %v, want KindUnavailable", code, fromDB("ack", err))
		}
	}
	if KindOf(fromDB("ack", &pgconn.PgError{Code: "23505"})) != KindInternal {
		t.Error("a unique violation became something other than an internal error")
	}
}
