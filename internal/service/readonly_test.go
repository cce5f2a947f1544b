package service_test

import (
	"context"
	"testing"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/testdb"
)

// A pooled connection whose server stopped taking writes (SQLSTATE 25006:
// a primary demoted, or made read-only, under an open connection) is a
// lost primary (issue #18): the request answers unavailable (503 with
// Retry-After), the connection is dropped, and the next request gets a new
// one -- which target_session_attrs=read-write leads to the primary --
// instead of failing on the same connection again.
func TestReadOnlyServerIsALostPrimary(t *testing.T) {
	ctx := context.Background()
	pool, err := db.NewPool(ctx, testdb.New(t), db.PoolOptions{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	svc := service.New(pool, service.Options{Limits: service.DefaultLimits()})
	if _, err := svc.Send(ctx, "default", "ro", service.MessageInput{Body: "before"}); err != nil {
		t.Fatal(err)
	}
	// The pool's one connection turns read-only, as a demoted server's
	// sessions do.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY"); err != nil {
		t.Fatal(err)
	}
	conn.Release()

	_, err = svc.Send(ctx, "default", "ro", service.MessageInput{Body: "during"})
	if service.KindOf(err) != service.KindUnavailable {
		t.Fatalf("send on a read-only server: %v (kind %d), want unavailable", err, service.KindOf(err))
	}
	if _, err := svc.Send(ctx, "default", "ro", service.MessageInput{Body: "after"}); err != nil {
		t.Fatalf("the next send still failed (the read-only connection stayed in the pool?): %v", err)
	}
}
