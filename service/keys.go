package service

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/skipq/skipq/db"
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

type cachedKey struct {
	key     APIKey
	valid   bool
	expires time.Time
}

// keyCache remembers verified (and rejected) secrets by hash for
// KeyCacheTTL. Rejections are cached too, so a client hammering with a bad
// key costs one query per TTL, not one per request. Bounded: when full it
// is cleared (entries are cheap to re-learn).
type keyCache struct {
	mu      sync.Mutex
	entries map[[32]byte]cachedKey
}

const keyCacheMax = 10000

// Authenticate returns the key a secret belongs to, or ErrUnauthenticated.
func (s *Service) Authenticate(ctx context.Context, secret string) (APIKey, error) {
	if !strings.HasPrefix(secret, secretPrefix) || len(secret) > 128 {
		return APIKey{}, ErrUnauthenticated
	}
	hash := sha256.Sum256([]byte(secret))
	c := &s.keys
	c.mu.Lock()
	e, ok := c.entries[hash]
	c.mu.Unlock()
	if ok && time.Now().Before(e.expires) {
		if !e.valid {
			return APIKey{}, ErrUnauthenticated
		}
		return e.key, nil
	}
	row, err := s.q.APIKeyGetBySecretHash(ctx, hash[:])
	e = cachedKey{expires: time.Now().Add(KeyCacheTTL)}
	switch {
	case err == nil:
		e.key, e.valid = keyFromRow(row), true
	case errors.Is(db.NotFound(err), db.ErrNotFound):
	default:
		return APIKey{}, fromDB("authenticate", err)
	}
	c.mu.Lock()
	if c.entries == nil || len(c.entries) >= keyCacheMax {
		c.entries = map[[32]byte]cachedKey{}
	}
	c.entries[hash] = e
	c.mu.Unlock()
	if !e.valid {
		return APIKey{}, ErrUnauthenticated
	}
	return e.key, nil
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
