package handlers

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"
)

// rateLimiter is a token bucket per caller: per API key when auth is on,
// per client IP otherwise (and on the credential-free receipt routes).
type rateLimiter struct {
	limit rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// idleBucket is how long an unused bucket is kept (it is full again by
// then, so dropping it changes nothing).
const idleBucket = 10 * time.Minute

func newRateLimiter(perSecond float64, burst int) *rateLimiter {
	return &rateLimiter{limit: rate.Limit(perSecond), burst: burst, buckets: map[string]*bucket{}, swept: time.Now()}
}

// allow takes a token for caller, or says how long until one is there.
func (l *rateLimiter) allow(caller string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > idleBucket {
		for k, b := range l.buckets {
			if now.Sub(b.seen) > idleBucket {
				delete(l.buckets, k)
			}
		}
		l.swept = now
	}
	b, ok := l.buckets[caller]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(l.limit, l.burst)}
		l.buckets[caller] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// empty reports whether caller's bucket is empty and how long until it
// holds a token again, without taking one.
func (l *rateLimiter) empty(caller string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[caller]
	if !ok {
		return false, 0
	}
	tokens := b.lim.TokensAt(now)
	if tokens >= 1 {
		return false, 0
	}
	return true, time.Duration((1 - tokens) / float64(l.limit) * float64(time.Second))
}

// limitRate answers 429 too_many_requests with Retry-After (whole seconds,
// at least 1) when the caller's bucket is empty. callerKey names the caller.
func limitRate(l *rateLimiter, callerKey func(*gin.Context) string) gin.HandlerFunc {
	return func(c *gin.Context) {
		if ok, wait := l.allow(callerKey(c), time.Now()); !ok {
			tooManyRequests(c, wait, "rate limit exceeded; retry after the Retry-After delay")
			return
		}
		c.Next()
	}
}

func tooManyRequests(c *gin.Context, wait time.Duration, msg string) {
	c.Header("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
	abortWith(c, http.StatusTooManyRequests, "too_many_requests", msg, nil)
}

// byKeyOrIP: the authenticated key when there is one, else the client IP.
func byKeyOrIP(c *gin.Context) string {
	if id, ok := identityOf(c); ok && id.KeyID != 0 {
		return "key:" + strconv.FormatInt(id.KeyID, 10)
	}
	return clientAddress(c)
}

// Limiters are a node's per-caller buckets: SKIPQ_RATE_LIMIT's (per API
// key, else per client address) and the failed authentications of each
// address (SKIPQ_AUTH_FAILURE_LIMIT). One set serves every endpoint of the
// node, so a key or an address has one budget whichever protocol it uses.
type Limiters struct {
	rate, failures *rateLimiter // nil: off
}

// NewLimiters makes the buckets of cfg's RateLimit and AuthFailureLimit.
func NewLimiters(cfg Config) *Limiters {
	l := &Limiters{}
	if cfg.RateLimit > 0 {
		l.rate = newRateLimiter(cfg.RateLimit, cfg.RateBurst)
	}
	if cfg.AuthFailureLimit > 0 {
		l.failures = newRateLimiter(cfg.AuthFailureLimit, max(1, cfg.AuthFailureBurst))
	}
	return l
}

// For returns the limits of a caller at address (clientAddress's form for
// HTTP; "ip:" and the peer's address for other endpoints).
func (l *Limiters) For(address string) CallerLimits {
	return callerLimits{address: address, rate: l.rate, failures: l.failures}
}

// callerLimits are the CallerLimits of the caller at address.
type callerLimits struct {
	address        string
	rate, failures *rateLimiter
}

func (l callerLimits) Allow(keyID int64) (bool, time.Duration) {
	if l.rate == nil {
		return true, 0
	}
	caller := l.address
	if keyID != 0 {
		caller = "key:" + strconv.FormatInt(keyID, 10)
	}
	return l.rate.allow(caller, time.Now())
}

func (l callerLimits) AuthFailed() {
	if l.failures != nil {
		l.failures.allow(l.address, time.Now())
	}
}

func (l callerLimits) AuthBlocked() (bool, time.Duration) {
	if l.failures == nil {
		return false, 0
	}
	return l.failures.empty(l.address, time.Now())
}
