// Package node wires one skipq node: configuration, the database pool, the
// service, the LISTEN connection, the worker and the HTTP server.
package node

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/skipq/skipq/service"
)

// Config is a node's whole configuration: loaded from the environment,
// overridden by flags of the same meaning, validated once at start and
// logged (secrets masked).
type Config struct {
	DatabaseURL         string
	ListenerDatabaseURL string
	ListenAddr          string
	Auth                string // "required" or "off"
	Migrate             bool
	Role                Role
	WorkerVacuum        bool // the worker vacuums the messages table between autovacuum rounds
	DBMaxConns          int
	MaxRequestBytes     int64
	ReadTimeout         int     // seconds to read a request, headers and body; slow clients are cut off
	RateLimit           float64 // requests/s per API key (per IP with auth off); 0 = off
	RateBurst           int     // 0 = max(1, RateLimit)
	MetricsToken        string  // when set, /metrics needs it as a bearer token
	SQS                 SQSConfig
	Limits              service.Limits
}

// Role is what a node runs (SKIPQ_ROLE).
type Role string

const (
	RoleAll    Role = "all"    // the HTTP API and the worker
	RoleAPI    Role = "api"    // the HTTP API only
	RoleWorker Role = "worker" // the worker only, with /healthz, /readyz and /metrics
)

// ServesAPI reports whether the node serves the HTTP API (and so listens
// for wake-ups and publishes the SQL limits).
func (r Role) ServesAPI() bool { return r != RoleWorker }

// RunsWorker reports whether the node runs the worker.
func (r Role) RunsWorker() bool { return r != RoleAPI }

// DefaultConfig is SPEC §2's defaults.
func DefaultConfig() Config {
	return Config{
		ListenAddr:      ":8080",
		Auth:            "required",
		Migrate:         true,
		Role:            RoleAll,
		WorkerVacuum:    true,
		DBMaxConns:      16,
		ReadTimeout:     60,
		MaxRequestBytes: 16 << 20,
		Limits:          service.DefaultLimits(),
		SQS:             SQSConfig{Enabled: true, Region: "us-east-1"},
	}
}

// envVar binds one setting to its environment variable and flag.
type envVar struct {
	env, flag, usage string
	set              func(string) error
	get              func() string
}

func (c *Config) vars() []envVar {
	str := func(p *string) (func(string) error, func() string) {
		return func(v string) error { *p = v; return nil }, func() string { return *p }
	}
	num := func(p *int) (func(string) error, func() string) {
		return func(v string) error {
				n, err := strconv.Atoi(v)
				if err != nil {
					return fmt.Errorf("%q is not an integer", v)
				}
				*p = n
				return nil
			}, func() string {
				return strconv.Itoa(*p)
			}
	}
	var vs []envVar
	add := func(env, flagName, usage string, set func(string) error, get func() string) {
		vs = append(vs, envVar{env, flagName, usage, set, get})
	}
	s, g := str(&c.DatabaseURL)
	add("SKIPQ_DATABASE_URL", "database-url", "Postgres URL (also DATABASE_URL)", s, g)
	s, g = str(&c.ListenerDatabaseURL)
	add("SKIPQ_LISTENER_DATABASE_URL", "listener-database-url", "direct (non-pooled) URL for LISTEN; default the database URL", s, g)
	s, g = str(&c.ListenAddr)
	add("SKIPQ_LISTEN_ADDR", "listen-addr", "HTTP address", s, g)
	s, g = str(&c.Auth)
	add("SKIPQ_AUTH", "auth", "API-key auth: required or off", s, g)
	add("SKIPQ_MIGRATE", "migrate", "apply pending migrations at start (true/false)",
		func(v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%q is not a boolean", v)
			}
			c.Migrate = b
			return nil
		}, func() string { return strconv.FormatBool(c.Migrate) })
	add("SKIPQ_WORKER_VACUUM", "worker-vacuum", "the worker vacuums the messages table when dead rows pile up (true/false)",
		func(v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%q is not a boolean", v)
			}
			c.WorkerVacuum = b
			return nil
		}, func() string { return strconv.FormatBool(c.WorkerVacuum) })
	s, g = str((*string)(&c.Role))
	add("SKIPQ_ROLE", "role", "what this node runs: all, api or worker", s, g)
	n, gn := num(&c.DBMaxConns)
	add("SKIPQ_DB_MAX_CONNS", "db-max-conns", "largest database pool", n, gn)
	add("SKIPQ_MAX_REQUEST_BYTES", "max-request-bytes", "largest HTTP request body",
		func(v string) error {
			b, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("%q is not an integer", v)
			}
			c.MaxRequestBytes = b
			return nil
		}, func() string { return strconv.FormatInt(c.MaxRequestBytes, 10) })
	n, gn = num(&c.ReadTimeout)
	add("SKIPQ_HTTP_READ_TIMEOUT", "http-read-timeout", "seconds a client has to send a whole request (slow clients are cut off)", n, gn)
	add("SKIPQ_RATE_LIMIT", "rate-limit", "requests per second per API key (per client IP with auth off); 0 = no limit",
		func(v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("%q is not a number", v)
			}
			c.RateLimit = f
			return nil
		}, func() string { return strconv.FormatFloat(c.RateLimit, 'g', -1, 64) })
	n, gn = num(&c.RateBurst)
	add("SKIPQ_RATE_BURST", "rate-burst", "requests a caller may burst above the rate; 0 = the rate, at least 1", n, gn)
	s, g = str(&c.MetricsToken)
	add("SKIPQ_METRICS_TOKEN", "metrics-token", "when set, /metrics needs Authorization: Bearer <token> (prefer the variable: flags show in ps)", s, g)
	vs = append(vs, c.SQS.vars()...)
	l := &c.Limits
	for _, lim := range []struct {
		env, flag string
		p         *int
	}{
		{"SKIPQ_MAX_RECEIVE_MESSAGES", "max-receive-messages", &l.MaxReceiveMessages},
		{"SKIPQ_MAX_WAIT_SECONDS", "max-wait-seconds", &l.MaxWaitSeconds},
		{"SKIPQ_MAX_VISIBILITY_SECONDS", "max-visibility-seconds", &l.MaxVisibilitySeconds},
		{"SKIPQ_MAX_DELAY_SECONDS", "max-delay-seconds", &l.MaxDelaySeconds},
		{"SKIPQ_MAX_EXPIRATION_SECONDS", "max-expiration-seconds", &l.MaxExpirationSeconds},
		{"SKIPQ_MAX_RECEIVE_COUNT", "max-receive-count", &l.MaxReceiveCount},
		{"SKIPQ_MAX_MESSAGE_BYTES", "max-message-bytes", &l.MaxMessageBytes},
		{"SKIPQ_MAX_RESPONSE_BYTES", "max-response-bytes", &l.MaxResponseBytes},
		{"SKIPQ_MAX_WAITERS", "max-waiters", &l.MaxWaiters},
	} {
		n, g := num(lim.p)
		add(lim.env, lim.flag, "limit (SPEC §2)", n, g)
	}
	return vs
}

// DatabaseURLFromEnv is the database URL the environment gives, for commands
// that need nothing else: SKIPQ_DATABASE_URL, else DATABASE_URL.
func DatabaseURLFromEnv() string {
	if v := os.Getenv("SKIPQ_DATABASE_URL"); v != "" {
		return v
	}
	return os.Getenv("DATABASE_URL")
}

// Load reads the environment, then parses args as flags over it.
func (c *Config) Load(fs *flag.FlagSet, args []string) error {
	if err := c.Bind(fs); err != nil {
		return err
	}
	return fs.Parse(args)
}

// Bind reads the environment into c and defines the flags that override
// it, for commands that parse fs themselves.
func (c *Config) Bind(fs *flag.FlagSet) error {
	c.DatabaseURL = DatabaseURLFromEnv()
	vars := c.vars()
	for _, v := range vars {
		if raw, ok := os.LookupEnv(v.env); ok && raw != "" {
			if err := v.set(raw); err != nil {
				return fmt.Errorf("%s: %w", v.env, err)
			}
		}
	}
	for _, v := range vars {
		fs.Func(v.flag, v.usage+" ($"+v.env+")", v.set)
	}
	return nil
}

// Validate checks the configuration once, at start.
func (c *Config) Validate() error {
	var errs []error
	if c.DatabaseURL == "" {
		errs = append(errs, errors.New("SKIPQ_DATABASE_URL (or DATABASE_URL) is required"))
	}
	if c.Auth != "required" && c.Auth != "off" {
		errs = append(errs, fmt.Errorf("SKIPQ_AUTH must be required or off, not %q", c.Auth))
	}
	if c.Role != RoleAll && c.Role != RoleAPI && c.Role != RoleWorker {
		errs = append(errs, fmt.Errorf("SKIPQ_ROLE must be all, api or worker, not %q", c.Role))
	}
	if c.DBMaxConns < 2 {
		errs = append(errs, errors.New("SKIPQ_DB_MAX_CONNS must be at least 2"))
	}
	if c.ReadTimeout < 1 {
		errs = append(errs, errors.New("SKIPQ_HTTP_READ_TIMEOUT must be at least 1"))
	}
	if c.RateLimit < 0 || c.RateBurst < 0 {
		errs = append(errs, errors.New("SKIPQ_RATE_LIMIT and SKIPQ_RATE_BURST must not be negative"))
	}
	if err := c.SQS.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxRequestBytes < 1024 {
		errs = append(errs, errors.New("SKIPQ_MAX_REQUEST_BYTES must be at least 1024"))
	}
	l := c.Limits
	for name, v := range map[string]int{
		"SKIPQ_MAX_RECEIVE_MESSAGES": l.MaxReceiveMessages, "SKIPQ_MAX_WAIT_SECONDS": l.MaxWaitSeconds,
		"SKIPQ_MAX_VISIBILITY_SECONDS": l.MaxVisibilitySeconds, "SKIPQ_MAX_DELAY_SECONDS": l.MaxDelaySeconds,
		"SKIPQ_MAX_EXPIRATION_SECONDS": l.MaxExpirationSeconds, "SKIPQ_MAX_RECEIVE_COUNT": l.MaxReceiveCount,
		"SKIPQ_MAX_MESSAGE_BYTES": l.MaxMessageBytes, "SKIPQ_MAX_RESPONSE_BYTES": l.MaxResponseBytes,
		"SKIPQ_MAX_WAITERS": l.MaxWaiters,
	} {
		if v < 1 {
			errs = append(errs, fmt.Errorf("%s must be at least 1", name))
		}
	}
	return errors.Join(errs...)
}

// rateBurst is the effective burst.
func (c Config) rateBurst() int {
	if c.RateBurst > 0 {
		return c.RateBurst
	}
	return max(1, int(c.RateLimit))
}

func (c Config) listenerURL() string {
	if c.ListenerDatabaseURL != "" {
		return c.ListenerDatabaseURL
	}
	return c.DatabaseURL
}

// LogValue is the startup log line's view: passwords and tokens masked.
func (c Config) LogValue() slog.Value {
	var attrs []slog.Attr
	for _, v := range c.vars() {
		val := v.get()
		if strings.Contains(v.env, "DATABASE_URL") {
			val = maskURL(val)
		}
		if (strings.HasSuffix(v.env, "_TOKEN") || strings.HasSuffix(v.env, "_KEY")) && val != "" {
			val = "xxxxx"
		}
		attrs = append(attrs, slog.String(v.env, val))
	}
	return slog.GroupValue(attrs...)
}

func maskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}
