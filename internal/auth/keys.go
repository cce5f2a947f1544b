// Package auth is API keys: creating, listing and revoking them, and
// authenticating a request's secret (or an SQS access key id) against them
// through a per-node cache. The queue service knows nothing of keys beyond
// the id a request's context names for message history
// (service.WithKeyID).
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/service"
)

// Key is a stored key (never its secret).
type Key struct {
	ID        int64
	Tenant    string
	Role      string // read, write or admin
	Name      string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// String is how logs name a key.
func (k Key) String() string {
	return fmt.Sprintf("key %d (%s, %s/%s)", k.ID, k.Name, k.Tenant, k.Role)
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

// RoleName is the role of a rank (RoleRank's inverse); "" for none.
func RoleName(rank int) string {
	if rank < 1 || rank > len(roles) {
		return ""
	}
	return roles[rank-1]
}

// secretPrefix marks skipq secrets so they are recognisable in leaks.
const secretPrefix = "skq_"

// Keys are the API keys of one node: the statements on them and the
// node's caches of what it learned about secrets and access key ids.
type Keys struct {
	q            *db.Queries // each statement run as package db decides (db.Open)
	secrets      keyCache
	accessKeyIDs keyCache // SQS access key ids
}

// New builds the keys of a node on a pool; answers about secrets and access
// key ids are cached for cacheTTL (0: KeyCacheTTL).
func New(pool *pgxpool.Pool, cacheTTL time.Duration) *Keys {
	return &Keys{
		q:            db.Open(pool),
		secrets:      newKeyCache(cacheTTL),
		accessKeyIDs: newKeyCache(cacheTTL),
	}
}

// Create stores a new key and returns it with its secret, which is shown
// once and never stored (only its SHA-256 is).
func (k *Keys) Create(ctx context.Context, tenant, role, name string) (Key, string, error) {
	var is []service.Issue
	if tenant == "" || len(tenant) > 256 || strings.ContainsAny(tenant, " \t\r\n") {
		is = append(is, service.Issue{Path: "tenant", Message: "must be 1 to 256 bytes without whitespace"})
	}
	if RoleRank(role) == 0 {
		is = append(is, service.Issue{Path: "role", Message: "must be read, write or admin"})
	}
	if name == "" || len(name) > 256 {
		is = append(is, service.Issue{Path: "name", Message: "must be 1 to 256 bytes"})
	}
	for _, f := range []struct{ path, v string }{{"tenant", tenant}, {"name", name}} {
		if msg := service.TextProblem(f.v); msg != "" {
			is = append(is, service.Issue{Path: f.path, Message: msg})
		}
	}
	if len(is) > 0 {
		return Key{}, "", service.Invalid(is...)
	}
	secret := secretPrefix + rand.Text() + rand.Text() // 2 × 128 bits
	row, err := k.q.APIKeyCreate(ctx, db.APIKeyCreateParams{Tenant: tenant, Role: role, Name: name, SecretHash: hashSecret(secret)})
	if err != nil {
		return Key{}, "", service.FromDB("create key", err)
	}
	return keyFromRow(row), secret, nil
}

// List lists every key, revoked ones included.
func (k *Keys) List(ctx context.Context) ([]Key, error) {
	rows, err := k.q.APIKeyList(ctx)
	if err != nil {
		return nil, service.FromDB("list keys", err)
	}
	out := make([]Key, len(rows))
	for i, r := range rows {
		out[i] = keyFromRow(r)
	}
	return out, nil
}

// Revoke revokes a key; nodes stop accepting it within KeyCacheTTL.
func (k *Keys) Revoke(ctx context.Context, id int64) (Key, error) {
	row, err := k.q.APIKeyRevoke(ctx, id)
	if err != nil {
		if errors.Is(db.NotFound(err), db.ErrNotFound) {
			return Key{}, noKey(id)
		}
		return Key{}, service.FromDB("revoke key", err)
	}
	return keyFromRow(row), nil
}

// Session returns a key by id, with the hash of its secret, unless it was
// revoked (ErrUnauthenticated): a console session is bound to the key it
// was opened with and to that hash (its MAC covers it), so a revoked key's
// sessions end.
func (k *Keys) Session(ctx context.Context, id int64) (Key, []byte, error) {
	row, err := k.q.APIKeyGetByID(ctx, id)
	if errors.Is(db.NotFound(err), db.ErrNotFound) {
		return Key{}, nil, ErrUnauthenticated
	}
	if err != nil {
		return Key{}, nil, service.FromDB("read key", err)
	}
	return keyFromRow(row), row.SecretHash, nil
}

// SQSCredentials returns the access key id of a live key, giving it newID()
// on first use.
func (k *Keys) SQSCredentials(ctx context.Context, keyID int64, newID func() string) (string, error) {
	keys, err := k.List(ctx)
	if err != nil {
		return "", err
	}
	for _, key := range keys {
		if key.ID != keyID {
			continue
		}
		if key.RevokedAt != nil {
			return "", &service.Error{Kind: service.KindInvalid, Message: "the key is revoked"}
		}
		id, err := k.q.SQSCredentialsCreate(ctx, db.SQSCredentialsCreateParams{AccessKeyID: newID(), KeyID: keyID})
		return id, service.FromDB("create SQS credentials", err)
	}
	return "", noKey(keyID)
}

// SQSAccessKeyIDs maps key ids to their access key ids.
func (k *Keys) SQSAccessKeyIDs(ctx context.Context) (map[int64]string, error) {
	rows, err := k.q.SQSCredentialsList(ctx)
	if err != nil {
		return nil, service.FromDB("list SQS credentials", err)
	}
	out := make(map[int64]string, len(rows))
	for _, r := range rows {
		out[r.KeyID] = r.AccessKeyID
	}
	return out, nil
}

func noKey(id int64) *service.Error {
	return &service.Error{Kind: service.KindNotFound, Message: fmt.Sprintf("no key with id %d", id)}
}

func hashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

func keyFromRow(r db.SkipqApiKey) Key {
	return Key{ID: r.ID, Tenant: r.Tenant, Role: r.Role, Name: r.Name, CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt}
}
