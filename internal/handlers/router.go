// Package handlers is skipq's HTTP layer (gin): it decodes and validates
// requests, calls the service and encodes responses. Queue semantics live in
// service; this package only speaks HTTP.
package handlers

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/metrics"
	"github.com/skipq/skipq/internal/service"
)

// Config is what the HTTP layer needs from the node's configuration.
type Config struct {
	AuthOff         bool
	MaxRequestBytes int64
	Log             *slog.Logger
	// Ready reports whether the node can serve (database answers, schema
	// current); /readyz answers 503 with the reason otherwise.
	Ready func(*gin.Context) error
	// Metrics are served at /metrics and time every request.
	Metrics *metrics.Metrics
	// RateLimit is each caller's sustained requests per second (0: no
	// limit), with bursts of RateBurst.
	RateLimit float64
	RateBurst int
	// AuthFailureLimit is each client IP's sustained failed
	// authentications per second (0: no limit), with bursts of
	// AuthFailureBurst; past it, the address gets 429 for any key the node
	// has not already verified.
	AuthFailureLimit float64
	AuthFailureBurst int
	// TrustedProxies are the addresses whose X-Forwarded-For and
	// X-Real-IP name the client, and whose X-Forwarded-Proto says the
	// client used TLS; nil trusts none, so no client can pick the address
	// the limits count it under.
	TrustedProxies []netip.Prefix
	// PublicOrigins are the origins (NormalizeOrigin's form) whose pages
	// may send state-changing requests from a browser; nil: the request's
	// own origin, from its Host header.
	PublicOrigins []string
	// MetricsToken, when set, is the bearer token /metrics requires: the
	// metrics name every tenant's queues and their depths.
	MetricsToken string
	// ServiceRoutesOnly serves /healthz, /readyz and /metrics and no API:
	// a worker-only node, which must still be probed and scraped.
	ServiceRoutesOnly bool
	// Console, when not nil, serves /console/ (the web console), under the
	// same body limit, rate limit and deadline as the API.
	Console ConsoleEndpoint
	// RequestBytes is the node's budget of request body bytes in flight,
	// shared by every route (the SQS endpoint holds the same one); nil: no
	// budget.
	RequestBytes *service.BodyBudget
	// Keys are the node's API keys, which authenticate requests (nil
	// only with AuthOff).
	Keys *auth.Keys
	// SQS, when set, serves SQS requests at every path outside the native
	// API's (docs/SQS.md#protocol).
	SQS SQSEndpoint
	// Limiters are the per-caller buckets, shared with the node's other
	// endpoints (the KubeMQ gRPC one); nil: made from RateLimit and
	// AuthFailureLimit for this handler alone.
	Limiters *Limiters
}

// SQSEndpoint is the SQS-compatible endpoint (package sqs). Serve gets the
// node's per-caller limits for the request, to apply once it knows the
// caller.
type SQSEndpoint interface {
	Accepts(r *http.Request) bool
	Serve(c *gin.Context, requestID string, limits CallerLimits)
}

// CallerLimits are the native API's per-caller limits for one request of
// another endpoint: SKIPQ_RATE_LIMIT's buckets (shared with the native API,
// so a key has one budget) and the failed-authentication budget of the
// client's address (SKIPQ_AUTH_FAILURE_LIMIT). An alias of an unnamed
// interface, so that package sqs can spell the same type without
// importing this one.
type CallerLimits = interface {
	// Allow takes a token from the bucket of the caller: API key keyID,
	// or the client's address when keyID is 0. Else it says how long
	// until there is one.
	Allow(keyID int64) (ok bool, retryAfter time.Duration)
	// AuthFailed counts a failed authentication against the address.
	AuthFailed()
	// AuthBlocked reports that the address spent its budget of failed
	// authentications, and how long until it has one again.
	AuthBlocked() (blocked bool, retryAfter time.Duration)
}

type api struct {
	svc *service.Service
}

// New returns the HTTP handler of a node.
func New(svc *service.Service, cfg Config) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	// The node's configuration checked the list; were it bad anyway, no
	// proxy is trusted (never all, gin's default).
	proxies := make([]string, len(cfg.TrustedProxies))
	for i, p := range cfg.TrustedProxies {
		proxies[i] = p.String()
	}
	if err := r.SetTrustedProxies(proxies); err != nil {
		cfg.Log.Error("trusted proxies: trusting none", "error", err)
		_ = r.SetTrustedProxies(nil)
	}
	r.HandleMethodNotAllowed = true
	// Route on the raw path so an encoded "/" stays inside its segment
	// (x%2Fmessages is a bad queue name, not another route); gin unescapes
	// the parameters afterwards.
	r.UseRawPath = true
	// Unknown paths get the 404 envelope, not a redirect.
	r.RedirectTrailingSlash = false
	r.ContextWithFallback = true // c.Request.Context() ends when the client leaves
	r.Use(withRequestID, logRequests(cfg.Log, cfg.Metrics), recoverPanics)
	limiters := cfg.Limiters
	if limiters == nil {
		limiters = NewLimiters(cfg)
	}
	rates, authFailures := limiters.rate, limiters.failures
	r.NoRoute(func(c *gin.Context) {
		if cfg.SQS != nil && !cfg.ServiceRoutesOnly && cfg.SQS.Accepts(c.Request) {
			cfg.SQS.Serve(c, requestID(c), limiters.For(clientAddress(c)))
			return
		}
		abortWith(c, http.StatusNotFound, "not_found", fmt.Sprintf("no route %s %s", c.Request.Method, c.Request.URL.Path), nil)
	})
	r.NoMethod(func(c *gin.Context) {
		abortWith(c, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("%s is not allowed on %s", c.Request.Method, c.Request.URL.Path), nil)
	})

	r.GET("/healthz", func(c *gin.Context) { answerJSON(c, http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", func(c *gin.Context) {
		if err := cfg.Ready(c); err != nil {
			c.Header("Retry-After", "1")
			abortWith(c, http.StatusServiceUnavailable, "unavailable", err.Error(), nil)
			return
		}
		answerJSON(c, http.StatusOK, gin.H{"status": "ready"})
	})

	metricsChain := gin.HandlersChain{gin.WrapH(cfg.Metrics.Handler())}
	if cfg.MetricsToken != "" {
		metricsChain = append(gin.HandlersChain{requireToken(cfg.MetricsToken, "/metrics")}, metricsChain...)
	}
	r.GET("/metrics", metricsChain...)
	if cfg.ServiceRoutesOnly {
		return r
	}

	h := &api{svc: svc}
	origins := originPolicy{public: cfg.PublicOrigins, proxies: cfg.TrustedProxies}
	// The SQS endpoint needs no such check: every SQS action names itself
	// in X-Amz-Target, a header no page can send without a preflight,
	// which this node never approves.
	v1 := r.Group("/v1", refuseCrossSite(origins), limitBody(cfg.MaxRequestBytes), strictQuery)
	var perCaller gin.HandlersChain
	if rates != nil {
		perCaller = gin.HandlersChain{limitRate(rates, byKeyOrIP)}
	}
	if cfg.Console != nil {
		// The console refuses cross-site requests itself, with its own
		// error page.
		chain := slices.Concat(gin.HandlersChain{limitBody(cfg.MaxRequestBytes)}, perCaller,
			gin.HandlersChain{admitBody(cfg.RequestBytes), deadline(RequestTimeout), serveConsole(cfg.Console, cfg.Keys, authFailures, origins)})
		r.Any("/console", chain...)
		r.Any("/console/*path", chain...)
	}
	// Receipts need no credentials: the handle is the capability. They are
	// rate limited per client IP (OPERATIONS.md), so the key a request may
	// name is looked up after the limiter, for the history alone.
	receipts := v1.Group("/receipts", slices.Concat(perCaller,
		gin.HandlersChain{identifyCaller(cfg.Keys, cfg.AuthOff, authFailures), admitBody(cfg.RequestBytes), deadline(RequestTimeout)})...)
	receipts.POST("/ack", h.ack)
	receipts.POST("/nack", h.nack)
	receipts.POST("/visibility", h.visibility)
	receipts.POST("/requeue", h.requeue)

	authed := v1.Group("", slices.Concat(gin.HandlersChain{authenticate(cfg.Keys, cfg.AuthOff, authFailures)}, perCaller,
		gin.HandlersChain{admitBody(cfg.RequestBytes)})...)
	read, write, admin := require(roleRead), require(roleWrite), require(roleAdmin)
	// A receive lasts as long as its wait; its claims are bounded one by one
	// in the service. Every other request has RequestTimeout in all.
	authed.POST("/queues/:queue/messages/receive", read, h.receive) // a peek needs only read; the handler checks write for the rest
	authed = authed.Group("", deadline(RequestTimeout))
	authed.GET("/openapi.json", read, serveOpenAPI)
	authed.GET("/queues", read, h.listQueues)
	authed.PUT("/queues/:queue", admin, h.putQueue)
	authed.GET("/queues/:queue", read, h.getQueue)
	authed.DELETE("/queues/:queue", admin, h.deleteQueue)
	authed.POST("/queues/:queue/purge", write, h.purgeQueue)
	authed.POST("/queues/:queue/messages", write, h.send)
	authed.POST("/queues/:queue/messages/batch", write, h.sendBatch)
	authed.GET("/queues/:queue/messages", read, h.browse)
	authed.GET("/queues/:queue/messages/:messageId", read, h.getMessage)
	authed.DELETE("/queues/:queue/messages/:messageId", write, h.deleteMessage)
	authed.POST("/queues/:queue/messages/:messageId/redrive", write, h.redrive)
	authed.GET("/queues/:queue/messages/:messageId/history", read, h.messageHistory)
	authed.POST("/queues/:queue/redrive", write, h.redriveQueue)
	authed.GET("/dlq", read, h.listDeadLettered)
	authed.GET("/messages", read, h.search)
	authed.GET("/topics", read, h.listTopics)
	authed.PUT("/topics/:topic", admin, h.putTopic)
	authed.GET("/topics/:topic", read, h.getTopic)
	authed.DELETE("/topics/:topic", admin, h.deleteTopic)
	authed.PUT("/topics/:topic/subscriptions/:queue", write, h.subscribe)
	authed.DELETE("/topics/:topic/subscriptions/:queue", write, h.unsubscribe)
	authed.POST("/topics/:topic/messages", write, h.publish)
	authed.GET("/topics/:topic/messages/:messageId", read, h.topicMessage)
	return r
}
