package auth_test

import (
	"context"
	"crypto/rand"
	"errors"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/testdb"
)

// keyLookups counts the key lookups (sqlc's APIKeyGetBySecretHash) that
// reach the database, as the driver sends them.
type keyLookups struct{ n atomic.Int64 }

func (k *keyLookups) count(sql string) {
	if strings.Contains(sql, "APIKeyGetBySecretHash") {
		k.n.Add(1)
	}
}

func (k *keyLookups) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	k.count(d.SQL)
	return ctx
}
func (k *keyLookups) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (k *keyLookups) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (k *keyLookups) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	k.count(d.SQL)
}
func (k *keyLookups) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// A flood of made-up keys (issue #18): 100,000 authentications with 20,000
// distinct random secrets, each used five times from eight goroutines at
// once, with a valid key among them. Each distinct secret costs at most one
// query in the cache period (the cache used to clear itself at 10,000
// entries, and concurrent misses each asked), and the valid key is never
// pushed out: it is looked up once.
func TestKeyFloodCostsOneLookupPerSecret(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	lookups := &keyLookups{}
	cfg.ConnConfig.Tracer = lookups
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// One cache period for the whole test: the bound is per period.
	keys := auth.New(pool, time.Hour)
	ctx := context.Background()
	valid, secret, err := keys.Create(ctx, "acme", "write", "flooded")
	if err != nil {
		t.Fatal(err)
	}

	const requests, distinct, workers = 100_000, 20_000, 8
	bogus := make([]string, distinct)
	for i := range bogus {
		bogus[i] = "skq_" + rand.Text() + rand.Text()
	}
	order := make([]int, requests)
	for i := range order {
		order[i] = i % distinct
	}
	mrand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })

	var wg sync.WaitGroup
	var wrong atomic.Int64
	var firstWrong atomic.Value
	for w := range workers {
		wg.Go(func() {
			for i := w; i < requests; i += workers {
				if i%100 == 0 {
					key, err := keys.Authenticate(ctx, secret)
					if err != nil || key.ID != valid.ID {
						wrong.Add(1)
						firstWrong.CompareAndSwap(nil, errors.Join(errors.New("valid key"), err))
					}
				}
				if _, err := keys.Authenticate(ctx, bogus[order[i]]); !errors.Is(err, auth.ErrUnauthenticated) {
					wrong.Add(1)
					firstWrong.CompareAndSwap(nil, errors.Join(errors.New("made-up key"), err))
				}
			}
		})
	}
	wg.Wait()
	if n := wrong.Load(); n > 0 {
		t.Fatalf("%d authentications answered wrongly, e.g. %v", n, firstWrong.Load())
	}
	// Every distinct secret once, and the valid key once.
	if got, limit := lookups.n.Load(), int64(distinct+1); got > limit {
		t.Fatalf("%d key lookups reached the database for %d distinct secrets (at most %d)", got, distinct+1, limit)
	}
	if _, ok := keys.Cached(secret); !ok {
		t.Fatal("the valid key was pushed out of the cache by the flood")
	}
}

// A key's tenant and name are stored as text: NUL or invalid UTF-8 is an
// issue at its path, not a database error (22021).
func TestCreateKeyRefusesNonText(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	keys := auth.New(pool, 0)
	for _, c := range []struct{ tenant, name, path string }{
		{"a\x00", "n", "tenant"}, {"\xff", "n", "tenant"}, {"t", "a\x00b", "name"}, {"t", "\xff", "name"},
	} {
		_, _, err := keys.Create(context.Background(), c.tenant, "read", c.name)
		var e *service.Error
		if !errors.As(err, &e) || e.Kind != service.KindInvalid || len(e.Issues) != 1 || e.Issues[0].Path != c.path {
			t.Errorf("tenant %q name %q: %v, want an issue at %s", c.tenant, c.name, err, c.path)
		}
	}
}
