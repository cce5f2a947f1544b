package handlers

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/service"
)

// Identity is who a request acts as: a tenant and a role rank
// (auth.RoleRank: read 1 < write 2 < admin 3).
type Identity struct {
	Tenant string
	Role   int
	KeyID  int64 // 0 when auth is off
}

var (
	roleRead  = auth.RoleRank("read")
	roleWrite = auth.RoleRank("write")
	roleAdmin = auth.RoleRank("admin")
)

const identityKey = "skipq.identity"

// defaultIdentity is every caller's identity when auth is off.
var defaultIdentity = Identity{Tenant: "default", Role: roleAdmin}

func identityOf(c *gin.Context) (Identity, bool) {
	v, ok := c.Get(identityKey)
	if !ok {
		return Identity{}, false
	}
	id, ok := v.(Identity)
	return id, ok
}

// tenant is the caller's tenant; routes that need one run behind authenticate.
func tenant(c *gin.Context) string {
	id, _ := identityOf(c)
	return id.Tenant
}

// authenticate resolves the caller's identity from `Authorization: Bearer
// <key>`; with auth off every caller is the default tenant's admin.
//
// failures (nil: none) limits failed authentications per client IP, ahead
// of the key lookup: a client that spent its budget on bad keys gets 429
// for anything the node cannot check without the database, so a flood of
// made-up keys costs no queries, while keys the node already trusts (its
// cache) go on working from the same address (a NAT or a proxy may put
// good and bad clients behind one).
func authenticate(keys *auth.Keys, authOff bool, failures *rateLimiter) gin.HandlerFunc {
	return func(c *gin.Context) {
		if authOff {
			c.Set(identityKey, defaultIdentity)
			c.Next()
			return
		}
		secret, ok := bearerToken(c.GetHeader("Authorization"))
		if !ok {
			if failures != nil {
				failures.allow(clientAddress(c), time.Now())
			}
			abortWith(c, http.StatusUnauthorized, "unauthenticated", "an API key is required: Authorization: Bearer <key>", nil)
			return
		}
		key, wait, err := lookUpKey(c, keys, secret, failures)
		switch {
		case errors.Is(err, errAuthBlocked):
			tooManyRequests(c, wait, "too many failed authentications from this address; retry after the Retry-After delay")
			return
		case errors.Is(err, auth.ErrUnauthenticated):
			abortWith(c, http.StatusUnauthorized, "unauthenticated", "the API key is unknown or revoked", nil)
			return
		case err != nil:
			fail(c, err)
			return
		}
		setIdentity(c, identityOfKey(key))
		c.Next()
	}
}

// errAuthBlocked is lookUpKey's answer for a key it may not look up: the
// address spent its failed authentications.
var errAuthBlocked = errors.New("too many failed authentications from this address")

// lookUpKey resolves a bearer secret to its key under the address's budget
// of failed authentications (failures; nil: none). While the budget lasts
// the node's keys answer (their cache, else the database), and an unknown or
// revoked key (auth.ErrUnauthenticated) spends one. Once it is spent,
// only keys in the node's cache are known; any other secret gets
// errAuthBlocked and the wait until the budget returns, without a query.
func lookUpKey(c *gin.Context, keys *auth.Keys, secret string, failures *rateLimiter) (auth.Key, time.Duration, error) {
	if failures != nil {
		if empty, wait := failures.empty(clientAddress(c), time.Now()); empty {
			if key, ok := keys.Cached(secret); ok {
				return key, 0, nil
			}
			return auth.Key{}, wait, errAuthBlocked
		}
	}
	key, err := keys.Authenticate(c.Request.Context(), secret)
	if errors.Is(err, auth.ErrUnauthenticated) && failures != nil {
		failures.allow(clientAddress(c), time.Now())
	}
	return key, 0, err
}

// clientAddress is the caller's key in the rate limiters when it names no
// API key, and always in the failed-authentication limiter.
func clientAddress(c *gin.Context) string { return "ip:" + c.ClientIP() }

// setIdentity makes id the request's; the service records its key in the
// history of the messages the request changes.
func setIdentity(c *gin.Context, id Identity) {
	c.Set(identityKey, id)
	c.Request = c.Request.WithContext(service.WithKeyID(c.Request.Context(), id.KeyID))
}

// identifyCaller names the API key a receipt route's request came with,
// when it is valid: receipts need no credentials (the handle is the
// capability), but the history of the messages they change records the key
// (docs/API.md#history). The key is looked up as on the authenticated routes
// (lookUpKey, the same budget of failed authentications); a missing,
// unknown or revoked key, or one the budget keeps from the lookup, changes
// nothing here.
func identifyCaller(keys *auth.Keys, authOff bool, failures *rateLimiter) gin.HandlerFunc {
	return func(c *gin.Context) {
		secret, ok := bearerToken(c.GetHeader("Authorization"))
		if authOff || !ok {
			return
		}
		if key, _, err := lookUpKey(c, keys, secret, failures); err == nil {
			setIdentity(c, identityOfKey(key))
		}
	}
}

func identityOfKey(key auth.Key) Identity {
	return Identity{Tenant: key.Tenant, Role: auth.RoleRank(key.Role), KeyID: key.ID}
}

// bearerToken is the token of an `Authorization: Bearer <token>` header.
// Auth schemes are case-insensitive (RFC 7235 §2.1): clients and proxies
// that send "bearer" or "BEARER" must not be locked out.
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// requireToken guards a route with one shared bearer token (the metrics
// scrape token). Both sides are hashed first so the constant-time compare
// leaks not even the token's length.
func requireToken(token, what string) gin.HandlerFunc {
	want := sha256.Sum256([]byte(token))
	return func(c *gin.Context) {
		got, ok := bearerToken(c.GetHeader("Authorization"))
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			abortWith(c, http.StatusUnauthorized, "unauthenticated",
				what+" needs Authorization: Bearer <token> with the configured token", nil)
			return
		}
		c.Next()
	}
}

// require lets the request through when the caller's role is at least min.
func require(min int) gin.HandlerFunc {
	return func(c *gin.Context) {
		id, ok := identityOf(c)
		if !ok || id.Role < min {
			abortWith(c, http.StatusForbidden, "access_denied",
				fmt.Sprintf("this route needs a key of role %s or above; this one's is %s", auth.RoleName(min), auth.RoleName(id.Role)), nil)
			return
		}
		c.Next()
	}
}
