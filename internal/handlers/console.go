package handlers

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/service"
)

// ConsoleEndpoint is the web console (package console). Serve gets what
// this layer knows of the request's caller.
type ConsoleEndpoint interface {
	Serve(w http.ResponseWriter, r *http.Request, caller ConsoleCaller)
}

// ConsoleCaller is a console request's caller as the native API sees it, so
// that the console follows the API's rules instead of its own copies: a
// key typed at its login spends the address's budget of failed
// authentications, forwarded headers are believed from the same proxies,
// and the same origins are public. An alias of an unnamed interface, so
// that package console can spell the same type without importing this one.
type ConsoleCaller = interface {
	// LookUpKey resolves an API key's secret as the API's routes do:
	// auth.ErrUnauthenticated for an unknown or revoked key; once the
	// address spent its budget, a service error of kind
	// KindTooManyRequests and how long until it has one again.
	LookUpKey(secret string) (key auth.Key, retryAfter time.Duration, err error)
	// Secure: the request reached the node over TLS, directly or through
	// a trusted proxy that says so.
	Secure() bool
	// CrossSite: a browser sent the request from a page that is not one
	// of the node's public origins.
	CrossSite() bool
}

// consoleCaller is the ConsoleCaller of the request c.
type consoleCaller struct {
	c        *gin.Context
	keys     *auth.Keys
	failures *rateLimiter
	origins  originPolicy
}

func (cc consoleCaller) LookUpKey(secret string) (auth.Key, time.Duration, error) {
	key, wait, err := lookUpKey(cc.c, cc.keys, secret, cc.failures)
	if errors.Is(err, errAuthBlocked) {
		err = &service.Error{Kind: service.KindTooManyRequests,
			Message: errAuthBlocked.Error(), Err: err}
	}
	return key, wait, err
}

func (cc consoleCaller) Secure() bool    { return cc.origins.secure(cc.c.Request) }
func (cc consoleCaller) CrossSite() bool { return cc.origins.crossSite(cc.c.Request) }

// serveConsole hands a request to the console with its caller.
func serveConsole(console ConsoleEndpoint, keys *auth.Keys, failures *rateLimiter, origins originPolicy) gin.HandlerFunc {
	return func(c *gin.Context) {
		console.Serve(c.Writer, c.Request, consoleCaller{c: c, keys: keys, failures: failures, origins: origins})
	}
}
