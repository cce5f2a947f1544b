package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// Role is what a caller may do (SPEC §5): read < write < admin.
type Role int

const (
	RoleRead Role = iota + 1
	RoleWrite
	RoleAdmin
)

// Identity is who a request acts as.
type Identity struct {
	Tenant string
	Role   Role
}

const identityKey = "skipq.identity"

// DefaultIdentity is every caller's identity when auth is off.
var DefaultIdentity = Identity{Tenant: "default", Role: RoleAdmin}

func identityOf(c *gin.Context) (Identity, bool) {
	v, ok := c.Get(identityKey)
	if !ok {
		return Identity{}, false
	}
	id, ok := v.(Identity)
	return id, ok
}

// tenant is the caller's tenant; routes that need one run behind authorize.
func tenant(c *gin.Context) string {
	id, _ := identityOf(c)
	return id.Tenant
}

// authenticate resolves the caller's identity. With auth off every caller is
// DefaultIdentity; with auth required no API keys exist yet, so every
// protected route answers 401.
func authenticate(authOff bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		if authOff {
			c.Set(identityKey, DefaultIdentity)
			c.Next()
			return
		}
		abortWith(c, http.StatusUnauthorized, "unauthenticated", "a valid API key is required (Authorization: Bearer <key>)", nil)
	}
}

// require lets the request through when the caller's role is at least min.
func require(min Role) gin.HandlerFunc {
	return func(c *gin.Context) {
		id, ok := identityOf(c)
		if !ok || id.Role < min {
			abortWith(c, http.StatusForbidden, "access_denied", "this API key's role does not allow this route", nil)
			return
		}
		c.Next()
	}
}
