package console

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/testdb"
)

// A session ends SessionLifetime after its login whatever its cookie says,
// and when its key is revoked; the clock is moved, not waited for.
func TestSessionEndsAfterLifetimeAndRevocation(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	svc := service.New(pool, service.Options{Limits: service.DefaultLimits()})
	keys := auth.New(pool, 0)
	key, apiKey, err := keys.Create(context.Background(), "default", "admin", "admin key")
	if err != nil {
		t.Fatal(err)
	}
	hash := sha256.Sum256([]byte(apiKey))
	secret := []byte("a secret of this test, not in the database")
	login := time.Now()
	at := login
	clock := func() time.Time { return at }
	c := New(svc, Config{Secret: secret, Keys: keys})
	c.now = clock
	session := c.sessionValue(key.ID, login, hash[:])
	identify := func() error {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, "/console/", nil)
		r.AddCookie(&http.Cookie{Name: sessionCookie, Value: session})
		_, err := c.identify(r)
		return err
	}
	for _, tc := range []struct {
		after time.Duration
		want  error
	}{
		{0, nil},
		{SessionLifetime - time.Second, nil},
		{SessionLifetime + time.Second, errNoSession},
		{100 * 365 * 24 * time.Hour, errNoSession},
		{-time.Hour, errNoSession}, // issued an hour ahead of this node's clock
	} {
		at = login.Add(tc.after)
		if err := identify(); !errors.Is(err, tc.want) {
			t.Errorf("%v after the login: %v, want %v", tc.after, err, tc.want)
		}
	}
	// Another node's secret signs nothing here.
	at = login
	other := New(svc, Config{Secret: []byte("another node's secret"), Keys: keys})
	session = other.sessionValue(key.ID, login, hash[:])
	if err := identify(); !errors.Is(err, errNoSession) {
		t.Errorf("a session signed with another secret: %v", err)
	}

	// A fresh node (an empty session cache, the clock going forward).
	c = New(svc, Config{Secret: secret, Keys: keys})
	c.now = clock
	session = c.sessionValue(key.ID, login, hash[:])
	if err := identify(); err != nil {
		t.Fatalf("before the revocation: %v", err)
	}
	if _, err := keys.Revoke(context.Background(), key.ID); err != nil {
		t.Fatal(err)
	}
	at = login.Add(sessionCheck + time.Second) // past the session cache
	if err := identify(); !errors.Is(err, errNoSession) {
		t.Errorf("after the key's revocation: %v", err)
	}
}
