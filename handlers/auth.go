package handlers

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/service"
)

// Identity is who a request acts as: a tenant and a role rank
// (service.RoleRank: read 1 < write 2 < admin 3).
type Identity struct {
	Tenant string
	Role   int
	KeyID  int64 // 0 when auth is off
}

var (
	roleRead  = service.RoleRank("read")
	roleWrite = service.RoleRank("write")
	roleAdmin = service.RoleRank("admin")
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
func authenticate(svc *service.Service, authOff bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		if authOff {
			c.Set(identityKey, defaultIdentity)
			c.Next()
			return
		}
		secret, ok := bearerToken(c.GetHeader("Authorization"))
		if !ok {
			abortWith(c, http.StatusUnauthorized, "unauthenticated", "an API key is required: Authorization: Bearer <key>", nil)
			return
		}
		key, err := svc.Authenticate(c.Request.Context(), secret)
		if errors.Is(err, service.ErrUnauthenticated) {
			abortWith(c, http.StatusUnauthorized, "unauthenticated", "the API key is unknown or revoked", nil)
			return
		}
		if err != nil {
			fail(c, err)
			return
		}
		c.Set(identityKey, Identity{Tenant: key.Tenant, Role: service.RoleRank(key.Role), KeyID: key.ID})
		c.Next()
	}
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
			abortWith(c, http.StatusForbidden, "access_denied", "this API key's role does not allow this route", nil)
			return
		}
		c.Next()
	}
}
