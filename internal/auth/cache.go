package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/service"
)

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
	key     Key
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
func (c *keyCache) cached(hash [32]byte, now time.Time) (Key, error) {
	if e, found := c.valid.Get(hash); found && now.Before(e.expires) {
		return e.key, nil
	}
	if until, found := c.rejected.Get(hash); found && now.Before(until) {
		return Key{}, ErrUnauthenticated
	}
	return Key{}, errNotCached
}

// Cached is the key a secret belongs to when the cache knows it as valid,
// without asking the database.
func (k *Keys) Cached(secret string) (Key, bool) {
	key, err := k.secrets.cached(sha256.Sum256([]byte(secret)), time.Now())
	return key, err == nil
}

// Authenticate returns the key a secret belongs to, or ErrUnauthenticated.
func (k *Keys) Authenticate(ctx context.Context, secret string) (Key, error) {
	if !strings.HasPrefix(secret, secretPrefix) || len(secret) > 128 {
		return Key{}, ErrUnauthenticated
	}
	c := &k.secrets
	hash := sha256.Sum256([]byte(secret))
	if key, err := c.cached(hash, time.Now()); !errors.Is(err, errNotCached) {
		return key, err
	}
	ch := c.lookups.DoChan(string(hash[:]), func() (any, error) {
		// A request that came in while the lookup before it was storing
		// its answer finds it here instead of asking again.
		if key, err := c.cached(hash, time.Now()); !errors.Is(err, errNotCached) {
			return key, err
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keyLookupTimeout)
		defer cancel()
		row, err := k.q.APIKeyGetBySecretHash(ctx, hash[:])
		return c.remember(hash, row, err)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return Key{}, r.Err
		}
		return r.Val.(Key), nil
	case <-ctx.Done():
		return Key{}, service.FromDB("authenticate", ctx.Err())
	}
}

// AuthenticateSQS returns the live key an access key id belongs to, or
// ErrUnauthenticated. Answers are cached like secrets' (keyCache: valid ids
// and rejected ones apart, for KeyCacheTTL).
func (k *Keys) AuthenticateSQS(ctx context.Context, accessKeyID string) (Key, error) {
	if len(accessKeyID) > 128 {
		return Key{}, ErrUnauthenticated
	}
	c := &k.accessKeyIDs
	hash := sha256.Sum256([]byte(accessKeyID))
	if key, err := c.cached(hash, time.Now()); !errors.Is(err, errNotCached) {
		return key, err
	}
	row, err := k.q.SQSCredentialsAuthenticate(ctx, accessKeyID)
	return c.remember(hash, row, err)
}

// CachedSQS reports whether an access key id belongs to a live key the
// node verified within KeyCacheTTL.
func (k *Keys) CachedSQS(accessKeyID string) bool {
	_, err := k.accessKeyIDs.cached(sha256.Sum256([]byte(accessKeyID)), time.Now())
	return err == nil
}

// remember caches the database's answer about hash (a key's row, or
// not found: unknown or revoked) for the cache's ttl and returns it as
// Authenticate does; another error is returned uncached.
func (c *keyCache) remember(hash [32]byte, row db.SkipqApiKey, err error) (Key, error) {
	expires := time.Now().Add(c.ttl)
	switch {
	case err == nil:
		key := keyFromRow(row)
		c.valid.Add(hash, cachedKey{key: key, expires: expires})
		return key, nil
	case errors.Is(db.NotFound(err), db.ErrNotFound):
		c.valid.Remove(hash) // revoked
		c.rejected.Add(hash, expires)
		return Key{}, ErrUnauthenticated
	default:
		return Key{}, service.FromDB("authenticate", err)
	}
}
