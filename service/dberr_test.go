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
