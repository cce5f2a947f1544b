package handlers

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
)

// Browsers say where a request comes from: Origin on every cross-site
// request and every POST, Sec-Fetch-Site on every request of a recent
// browser. Other clients (curl, the SDKs, the Go client) send neither, and
// cannot be made to by a web page, so a request without both is not a
// browser's and these rules let it through.

// originPolicy decides which browser requests may change state: those from
// a page of one of the node's public origins.
type originPolicy struct {
	// public are the node's public origins (NormalizeOrigin's form); nil:
	// the request's own origin, from its Host header.
	public []string
	// proxies are the addresses whose X-Forwarded-Proto is believed.
	proxies []netip.Prefix
}

// crossSite reports a browser request that no page of the node's public
// origins made: Sec-Fetch-Site other than same-origin or none (a same-site
// page is another origin too: a sibling subdomain), or an Origin that is not
// a public one ("null" included). Comparing with the configured origins
// rather than the request's Host is what stops DNS rebinding: there the
// attacker's page and the request carry the attacker's name.
func (p originPolicy) crossSite(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return true
	}
	header := r.Header.Get("Origin")
	if header == "" {
		return false
	}
	origin, err := NormalizeOrigin(header)
	if err != nil {
		return true
	}
	if p.public == nil {
		return origin != p.ownOrigin(r)
	}
	return !slices.Contains(p.public, origin)
}

// ownOrigin is the origin the request names itself: its Host, over https
// when secure. "" when Host is no host.
func (p originPolicy) ownOrigin(r *http.Request) string {
	scheme := "http"
	if p.secure(r) {
		scheme = "https"
	}
	origin, err := NormalizeOrigin(scheme + "://" + r.Host)
	if err != nil {
		return ""
	}
	return origin
}

// secure: the request reached the node over TLS, directly or through one of
// SKIPQ_TRUSTED_PROXIES that says so in X-Forwarded-Proto (anyone else's
// header is ignored: a client could claim https over plain http).
func (p originPolicy) secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	return strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") && fromProxy(r, p.proxies)
}

// fromProxy reports whether the request's TCP peer is one of proxies.
func fromProxy(r *http.Request, proxies []netip.Prefix) bool {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(proxies, func(p netip.Prefix) bool { return p.Contains(peer.Addr().Unmap()) })
}

// refuseCrossSite answers 403 to a browser request from another site that
// would change state (any method but GET, HEAD and OPTIONS). With auth off a
// web page could otherwise purge a queue on a node its visitor reaches,
// with a form post or a fetch that needs no preflight.
func refuseCrossSite(p originPolicy) gin.HandlerFunc {
	return func(c *gin.Context) {
		switch c.Request.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if p.crossSite(c.Request) {
				abortWith(c, http.StatusForbidden, "access_denied",
					"a browser request from another site may not change anything here (its Origin is not one of SKIPQ_PUBLIC_ORIGIN, or Sec-Fetch-Site is not same-origin)", nil)
				return
			}
		}
		c.Next()
	}
}

// NormalizeOrigin is an origin as browsers write it in the Origin header:
// scheme://host[:port], in lower case, without the scheme's default port.
func NormalizeOrigin(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("%q is not an origin (http or https://host[:port])", s)
	}
	host := strings.TrimSuffix(strings.ToLower(u.Host), ":")
	if port := u.Port(); (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		host = strings.TrimSuffix(host, ":"+port)
	}
	return u.Scheme + "://" + host, nil
}
