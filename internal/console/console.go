// Package console is skipq's web console (docs/OPERATIONS.md#web-console): server-rendered pages
// under /console/ for queues, messages, dead letters and this node's rates.
// Templates (html/template, so every value is escaped), htmx and the CSS are
// embedded in the binary; no request leaves the node. Pages call the
// service directly, with the role and tenant of the API key the session was
// opened with, exactly as the API would.
package console

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/metrics"
	"github.com/skipq/skipq/internal/service"
)

//go:embed templates static
var files embed.FS

// Config is what the console needs from its node.
type Config struct {
	// AuthOff: every visitor is the default tenant's admin, with no login
	// (SKIPQ_AUTH=off).
	AuthOff bool
	// Secret keys the MACs of session cookies and notices. It must not be
	// in the database (a copy of the key table must not open sessions),
	// and nodes behind one address need the same one. Empty: a random key
	// of this process.
	Secret []byte
	// Keys are the node's API keys: a session lives as long as its key
	// (nil only with AuthOff).
	Keys *auth.Keys
	Log  *slog.Logger
	// Totals reports this node's message counters of a tenant (nil: the
	// rates page shows none).
	Totals func(tenant string) metrics.Totals
}

// Console serves /console/.
type Console struct {
	svc   *service.Service
	cfg   Config
	pages map[string]*template.Template
	mux   *http.ServeMux
	// staticTag is a hash of the static files, appended to their URLs so
	// browsers may cache them for good.
	staticTag string
	sessions  sessionCache
	rates     rateSampler
	// now is the clock sessions and notices are checked against.
	now func() time.Time
}

// Caller is what the node's HTTP layer knows of a console request's caller
// (the same type as handlers.ConsoleCaller, an alias of this unnamed
// interface): its API key lookup under the address's budget of failed
// authentications, whether it came over TLS, and whether a browser sent it
// from a page of another origin than the node's public ones.
type Caller = interface {
	LookUpKey(secret string) (key auth.Key, retryAfter time.Duration, err error)
	Secure() bool
	CrossSite() bool
}

// New builds the console of a node.
func New(svc *service.Service, cfg Config) *Console {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if len(cfg.Secret) == 0 {
		cfg.Secret = make([]byte, 32)
		_, _ = rand.Read(cfg.Secret) // never fails (crypto/rand)
	}
	c := &Console{svc: svc, cfg: cfg, pages: parsePages(), staticTag: staticHash(),
		sessions: sessionCache{entries: map[int64]cachedSession{}}, rates: rateSampler{tenants: map[string][]rateSample{}},
		now: time.Now}
	c.routes()
	return c
}

func (c *Console) routes() {
	m := http.NewServeMux()
	static, err := fs.Sub(files, "static")
	if err != nil {
		panic(err)
	}
	m.Handle("GET /console/static/", http.StripPrefix("/console/static/", cacheForever(http.FileServerFS(static))))
	m.HandleFunc("GET /console/login", c.loginPage)
	m.HandleFunc("POST /console/login", c.login)
	m.HandleFunc("POST /console/logout", c.logout)

	read, write, admin := c.need(roleRead), c.need(roleWrite), c.need(roleAdmin)
	m.Handle("GET /console/{$}", read(c.queuesPage))
	m.Handle("GET /console/queue-rows", read(c.queueRows))
	m.Handle("GET /console/queues/{queue}", read(c.queuePage))
	m.Handle("POST /console/queues/{queue}/settings", admin(c.saveSettings))
	m.Handle("POST /console/queues/{queue}/send", write(c.sendMessage))
	m.Handle("POST /console/queues/{queue}/purge", write(c.purgeQueue))
	m.Handle("POST /console/queues/{queue}/delete", admin(c.deleteQueue))
	m.Handle("POST /console/queues/{queue}/redrive", write(c.redriveAll))
	m.Handle("GET /console/queues/{queue}/messages/{id}", read(c.messagePage))
	m.Handle("POST /console/queues/{queue}/messages/{id}/delete", write(c.deleteMessage))
	m.Handle("POST /console/queues/{queue}/messages/{id}/redrive", write(c.redriveMessage))
	m.Handle("GET /console/dlq", read(c.deadLettersPage))
	m.Handle("GET /console/search", read(c.searchPage))
	m.Handle("GET /console/topics", read(c.topicsPage))
	m.Handle("GET /console/topics/{topic}", read(c.topicPage))
	m.Handle("GET /console/rates", read(c.ratesPage))
	m.Handle("GET /console/rate-values", read(c.rateValues))
	m.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, identity{}, http.StatusNotFound, "There is no such page.")
	})
	c.mux = m
}

// Serve serves a console request of caller with the console's security
// headers.
func (c *Console) Serve(w http.ResponseWriter, r *http.Request, caller Caller) {
	r = r.WithContext(context.WithValue(r.Context(), callerKey{}, caller))
	h := w.Header()
	// No other origin, no inline script, no inline style, no framing.
	h.Set("Content-Security-Policy", "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	if r.URL.Path == "/console" {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
		return
	}
	if r.Method == http.MethodPost {
		same, err := c.sameOrigin(r)
		if err != nil {
			c.formUnread(w, r, err)
			return
		}
		if !same {
			c.fail(w, r, identity{}, http.StatusForbidden,
				"This request did not come from a console page of this node (its Origin, or its CSRF token, did not check out).")
			return
		}
	}
	c.mux.ServeHTTP(w, r)
}

// formUnread answers a POST whose form could not be read whole, where its
// fields would otherwise read empty: 503 with Retry-After past the node's
// budget of request bytes in flight (SKIPQ_MAX_INFLIGHT_BYTES, as the API
// answers), 413 past the request limit, 400 otherwise. A form is read only
// once its headers show it comes from the node's pages: for the CSRF token
// (sameOrigin), at the login for the key, and otherwise once its session
// is known (need).
func (c *Console) formUnread(w http.ResponseWriter, r *http.Request, err error) {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.Is(err, service.ErrBodyBudget):
		w.Header().Set("Retry-After", "1")
		c.fail(w, r, identity{}, http.StatusServiceUnavailable, service.ErrBodyBudget.Message)
	case errors.As(err, &tooLarge):
		c.fail(w, r, identity{}, http.StatusRequestEntityTooLarge,
			fmt.Sprintf("The form is larger than this node takes (%d bytes).", tooLarge.Limit))
	default:
		c.fail(w, r, identity{}, http.StatusBadRequest, "The form could not be read.")
	}
}

// cacheForever serves the static files (no directory listing), cached for
// good when asked for by their content tag.
func cacheForever(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		if r.URL.Query().Get("v") != "" {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		}
		h.ServeHTTP(w, r)
	})
}

// sessionCache remembers for a few seconds what a session's key is, so
// polling pages cost no key lookup each time; a revoked key's sessions end
// within sessionCheck.
type sessionCache struct {
	mu      sync.Mutex
	entries map[int64]cachedSession
}

type cachedSession struct {
	key     auth.Key
	hash    []byte // nil: revoked or unknown
	expires time.Time
}

const (
	sessionCheck      = 5 * time.Second
	sessionCacheLimit = 10000
)
