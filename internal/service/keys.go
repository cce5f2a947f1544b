package service

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/skipq/skipq/internal/db"
)

// APIKey is a stored key (never its secret).
type APIKey struct {
	ID        int64
	Tenant    string
	Role      string // read, write or admin
	Name      string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// Roles, weakest first.
var roles = []string{"read", "write", "admin"}

// RoleRank orders roles (read 1 < write 2 < admin 3); 0 for anything else.
func RoleRank(role string) int {
	for i, r := range roles {
		if r == role {
			return i + 1
		}
	}
	return 0
}

// secretPrefix marks skipq secrets so they are recognisable in leaks.
const secretPrefix = "skq_"

// CreateKey stores a new key and returns it with its secret, which is shown
// once and never stored (only its SHA-256 is).
func (s *Service) CreateKey(ctx context.Context, tenant, role, name string) (APIKey, string, error) {
	var is issues
	if tenant == "" || len(tenant) > 256 || strings.ContainsAny(tenant, " \t\r\n") {
		is.add("tenant", "must be 1 to 256 bytes without whitespace")
	}
	if RoleRank(role) == 0 {
		is.add("role", "must be read, write or admin")
	}
	if name == "" || len(name) > 256 {
		is.add("name", "must be 1 to 256 bytes")
	}
	is.text("tenant", tenant)
	is.text("name", name)
	if err := is.err(); err != nil {
		return APIKey{}, "", err
	}
	secret := secretPrefix + rand.Text() + rand.Text() // 2 × 128 bits
	row, err := s.q.APIKeyCreate(ctx, db.APIKeyCreateParams{Tenant: tenant, Role: role, Name: name, SecretHash: hashSecret(secret)})
	if err != nil {
		return APIKey{}, "", fromDB("create key", err)
	}
	return keyFromRow(row), secret, nil
}

// ListKeys lists every key, revoked ones included.
func (s *Service) ListKeys(ctx context.Context) ([]APIKey, error) {
	rows, err := s.q.APIKeyList(ctx)
	if err != nil {
		return nil, fromDB("list keys", err)
	}
	out := make([]APIKey, len(rows))
	for i, r := range rows {
		out[i] = keyFromRow(r)
	}
	return out, nil
}

// RevokeKey revokes a key; nodes stop accepting it within KeyCacheTTL.
func (s *Service) RevokeKey(ctx context.Context, id int64) (APIKey, error) {
	row, err := s.q.APIKeyRevoke(ctx, id)
	if err != nil {
		if errors.Is(db.NotFound(err), db.ErrNotFound) {
			return APIKey{}, notFound("no key with id %d", id)
		}
		return APIKey{}, fromDB("revoke key", err)
	}
	return keyFromRow(row), nil
}

// KeyCacheTTL is how long a node trusts what it learned about a key: auth
// costs no query per request, and a revocation takes effect within it.
const KeyCacheTTL = 3 * time.Second

// ErrUnauthenticated is a key that does not check out.
var ErrUnauthenticated = errors.New("unauthenticated")

// The key cache's bounds. Valid keys and rejected secrets are kept apart so
// that a flood of made-up secrets can only push out other made-up secrets,
// never a key in use: validKeysMax is far above the keys one deployment
// has, and rejectedMax holds a flood's distinct secrets of one cache period
// (about 8 MB when full).
const (
	validKeysMax = 10_000
	rejectedMax  = 50_000
)

// keyLookupTimeout bounds the one database lookup that concurrent requests
// with the same unknown secret share: it must not end with the request that
// happened to start it.
const keyLookupTimeout = 10 * time.Second

type cachedKey struct {
	key     APIKey
	expires time.Time
}

// keyCache remembers verified and rejected secrets by hash for ttl, in two
// LRUs: a client hammering with one bad key costs one query per ttl, and
// concurrent requests with the same unknown secret share one query.
type keyCache struct {
	ttl      time.Duration
	valid    *lru.Cache[[32]byte, cachedKey]
	rejected *lru.Cache[[32]byte, time.Time] // when the rejection expires
	lookups  singleflight.Group
}

func newKeyCache(ttl time.Duration) keyCache {
	if ttl <= 0 {
		ttl = KeyCacheTTL
	}
	valid, err := lru.New[[32]byte, cachedKey](validKeysMax)
	if err != nil {
		panic(err) // only for a size below 1
	}
	rejected, err := lru.New[[32]byte, time.Time](rejectedMax)
	if err != nil {
		panic(err)
	}
	return keyCache{ttl: ttl, valid: valid, rejected: rejected}
}

// errNotCached: the cache knows nothing (current) of a secret.
var errNotCached = errors.New("not cached")

// cached is what the cache knows of hash: a valid key, a rejection
// (ErrUnauthenticated), or errNotCached.
func (c *keyCache) cached(hash [32]byte, now time.Time) (APIKey, error) {
	if e, found := c.valid.Get(hash); found && now.Before(e.expires) {
		return e.key, nil
	}
	if until, found := c.rejected.Get(hash); found && now.Before(until) {
		return APIKey{}, ErrUnauthenticated
	}
	return APIKey{}, errNotCached
}

// CachedKey is the key a secret belongs to when the cache knows it as
// valid, without asking the database.
func (s *Service) CachedKey(secret string) (APIKey, bool) {
	key, err := s.keys.cached(sha256.Sum256([]byte(secret)), time.Now())
	return key, err == nil
}

// Authenticate returns the key a secret belongs to, or ErrUnauthenticated.
func (s *Service) Authenticate(ctx context.Context, secret string) (APIKey, error) {
	if !strings.HasPrefix(secret, secretPrefix) || len(secret) > 128 {
		return APIKey{}, ErrUnauthenticated
	}
	hash := sha256.Sum256([]byte(secret))
	if key, err := s.keys.cached(hash, time.Now()); !errors.Is(err, errNotCached) {
		return key, err
	}
	ch := s.keys.lookups.DoChan(string(hash[:]), func() (any, error) {
		// A request that came in while the lookup before it was storing
		// its answer finds it here instead of asking again.
		if key, err := s.keys.cached(hash, time.Now()); !errors.Is(err, errNotCached) {
			return key, err
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keyLookupTimeout)
		defer cancel()
		return s.lookUpKey(ctx, hash)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return APIKey{}, r.Err
		}
		return r.Val.(APIKey), nil
	case <-ctx.Done():
		return APIKey{}, fromDB("authenticate", ctx.Err())
	}
}

// lookUpKey asks the database about hash and caches the answer.
func (s *Service) lookUpKey(ctx context.Context, hash [32]byte) (APIKey, error) {
	row, err := s.q.APIKeyGetBySecretHash(ctx, hash[:])
	return s.keys.remember(hash, row, err)
}

// remember caches the database's answer about hash (a key's row, or
// not found: unknown or revoked) for the cache's ttl and returns it as
// Authenticate does; another error is returned uncached.
func (c *keyCache) remember(hash [32]byte, row db.SkipqApiKey, err error) (APIKey, error) {
	expires := time.Now().Add(c.ttl)
	switch {
	case err == nil:
		key := keyFromRow(row)
		c.valid.Add(hash, cachedKey{key: key, expires: expires})
		return key, nil
	case errors.Is(db.NotFound(err), db.ErrNotFound):
		c.valid.Remove(hash) // revoked
		c.rejected.Add(hash, expires)
		return APIKey{}, ErrUnauthenticated
	default:
		return APIKey{}, fromDB("authenticate", err)
	}
}

func hashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

func keyFromRow(r db.SkipqApiKey) APIKey {
	return APIKey{ID: r.ID, Tenant: r.Tenant, Role: r.Role, Name: r.Name, CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt}
}

// String is how logs name a key.
func (k APIKey) String() string {
	return fmt.Sprintf("key %d (%s, %s/%s)", k.ID, k.Name, k.Tenant, k.Role)
}
