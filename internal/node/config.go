// Package node wires one skipq node: configuration, the database pool, the
// service, the LISTEN connection, the worker and the HTTP server.
package node

import (
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strings"

	"github.com/peterbourgon/ff/v3"

	"github.com/skipq/skipq/internal/handlers"
	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/sqs"
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
	WorkerVacuum        bool   // the worker vacuums the messages and ready tables between autovacuum rounds
	AckDurability       string // "sync" (acks wait for the WAL flush) or "async"
	DBMaxConns          int
	MaxRequestBytes     int64
	MaxInflightBytes    int64   // request body bytes the node holds at once, all routes; 0 = inflightPerRequest × MaxRequestBytes
	ReadTimeout         int     // seconds to read a request, headers and body; slow clients are cut off
	RateLimit           float64 // requests/s per API key (per IP with auth off); 0 = off
	RateBurst           int     // 0 = max(1, RateLimit)
	AuthFailureLimit    float64 // failed authentications/s per client IP before 429; 0 = off
	AuthFailureBurst    int
	TrustedProxies      string // comma list of IPs/CIDRs whose X-Forwarded-For names the client
	PublicOrigin        string // comma list of origins whose pages may change state from a browser
	MetricsToken        string // when set, /metrics needs it as a bearer token
	PprofAddr           string // a loopback address serving Go's runtime profiles; empty = none
	Console             bool   // serve the web console at /console/
	ConsoleSecret       string // signs console sessions; default derived from the SigV4 master key
	SQS                 SQSConfig
	KubeMQ              KubeMQConfig
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

// DefaultConfig is the default configuration (the limits of docs/API.md#limits).
func DefaultConfig() Config {
	return Config{
		ListenAddr:      ":8080",
		Auth:            "required",
		Migrate:         true,
		Role:            RoleAll,
		AckDurability:   "sync",
		WorkerVacuum:    true,
		Console:         true,
		DBMaxConns:      16,
		ReadTimeout:     60,
		MaxRequestBytes: 16 << 20,
		// Generous: a client retrying with a mistyped or revoked key
		// never meets it; a flood of made-up keys from one address does.
		AuthFailureLimit: 10,
		AuthFailureBurst: 100,
		Limits:           service.DefaultLimits(),
		SQS:              SQSConfig{Enabled: true, Region: "us-east-1"},
	}
}

// envPrefix makes a flag's environment variable: --db-max-conns is
// SKIPQ_DB_MAX_CONNS (ff's rule: upper case, "-" to "_", prefixed).
const envPrefix = "SKIPQ"

// EnvName is the environment variable of a flag.
func EnvName(flagName string) string {
	return envPrefix + "_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// bind defines c's flags on fs, each defaulting to c's current value: the
// one table of settings, from which -h, the environment and the startup
// log line are made.
func (c *Config) bind(fs *flag.FlagSet) {
	str := func(p *string, name, usage string) { fs.StringVar(p, name, *p, usage+" ($"+EnvName(name)+")") }
	num := func(p *int, name, usage string) { fs.IntVar(p, name, *p, usage+" ($"+EnvName(name)+")") }
	boolean := func(p *bool, name, usage string) { fs.BoolVar(p, name, *p, usage+" ($"+EnvName(name)+")") }
	str(&c.DatabaseURL, "database-url", "Postgres URL (also $DATABASE_URL)")
	str(&c.ListenerDatabaseURL, "listener-database-url", "direct (non-pooled) URL for LISTEN; default the database URL")
	str(&c.ListenAddr, "listen-addr", "HTTP address")
	str(&c.Auth, "auth", "API-key auth: required or off")
	boolean(&c.Migrate, "migrate", "apply pending migrations at start")
	boolean(&c.WorkerVacuum, "worker-vacuum", "the worker vacuums the messages and ready tables when dead rows pile up")
	str(&c.AckDurability, "ack-durability", "sync: an ack is answered once its commit is flushed; async: without waiting (a database crash may deliver again messages acked in its last moments)")
	boolean(&c.Console, "console", "serve the web console at /console/")
	str(&c.ConsoleSecret, "console-secret", "at least 32 characters, the same on every node: signs console sessions; default derived from the SigV4 master key, else random per process (prefer the variable: flags show in ps)")
	str((*string)(&c.Role), "role", "what this node runs: all, api or worker")
	num(&c.DBMaxConns, "db-max-conns", "largest database pool")
	fs.Int64Var(&c.MaxRequestBytes, "max-request-bytes", c.MaxRequestBytes,
		"largest HTTP request body ($"+EnvName("max-request-bytes")+")")
	fs.Int64Var(&c.MaxInflightBytes, "max-inflight-bytes", c.MaxInflightBytes,
		fmt.Sprintf("request body bytes the node holds at once over all routes (API, SQS, console), past which requests get 503; 0 = %d × the request limit ($%s)",
			inflightPerRequest, EnvName("max-inflight-bytes")))
	num(&c.ReadTimeout, "http-read-timeout", "seconds a client has to send a whole request (slow clients are cut off)")
	fs.Float64Var(&c.RateLimit, "rate-limit", c.RateLimit,
		"requests per second per API key (per client IP with auth off); 0 = no limit ($"+EnvName("rate-limit")+")")
	num(&c.RateBurst, "rate-burst", "requests a caller may burst above the rate; 0 = the rate, at least 1")
	fs.Float64Var(&c.AuthFailureLimit, "auth-failure-limit", c.AuthFailureLimit,
		"failed authentications per second per client IP before it gets 429 for unverified keys; 0 = no limit ($"+EnvName("auth-failure-limit")+")")
	num(&c.AuthFailureBurst, "auth-failure-burst", "failed authentications a client IP may burst above that rate")
	str(&c.TrustedProxies, "trusted-proxies", "comma-separated IPs or CIDRs of the proxies whose X-Forwarded-For names the client; empty = none")
	str(&c.PublicOrigin, "public-origin", "comma-separated origins (scheme://host[:port]) that browsers reach this node at; a browser request from any other origin may change nothing; default with auth off http://localhost, 127.0.0.1 and [::1] at the listening port, with auth on the request's own Host")
	str(&c.MetricsToken, "metrics-token", "when set, /metrics needs Authorization: Bearer <token> (prefer the variable: flags show in ps)")
	str(&c.PprofAddr, "pprof-addr", "loopback address (127.0.0.1:PORT or [::1]:PORT) serving Go's CPU, heap and allocation profiles at /debug/pprof/; empty = none")
	c.SQS.bind(str, boolean)
	c.KubeMQ.bind(str)
	for _, lim := range c.limits() {
		num(lim.p, lim.flag, lim.usage+" (docs/API.md#limits)")
	}
}

// limit is one of the limits of docs/API.md#limits with its flag.
type limit struct {
	flag  string
	p     *int
	usage string
}

func (c *Config) limits() []limit {
	l := &c.Limits
	return []limit{
		{"max-receive-messages", &l.MaxReceiveMessages, "largest maxMessages of a receive"},
		{"max-wait-seconds", &l.MaxWaitSeconds, "longest wait of a receive"},
		{"max-visibility-seconds", &l.MaxVisibilitySeconds, "longest lease"},
		{"max-delay-seconds", &l.MaxDelaySeconds, "longest delay of a send"},
		{"max-expiration-seconds", &l.MaxExpirationSeconds, "longest expiration of a message, and longest retention of acked ones"},
		{"max-receive-count", &l.MaxReceiveCount, "most deliveries of a message, and the count used when it and its queue say 0"},
		{"max-message-bytes", &l.MaxMessageBytes, "largest body plus metadata of one message, decoded"},
		{"max-response-bytes", &l.MaxResponseBytes, "a receive, browse or search answer stops taking messages past this size (at least one always comes)"},
		{"max-waiters", &l.MaxWaiters, "most receives waiting on this node; one more that would wait gets 429"},
	}
}

// DatabaseURLFromEnv is the database URL the environment gives, for commands
// that need nothing else: SKIPQ_DATABASE_URL, else DATABASE_URL.
func DatabaseURLFromEnv() string {
	if v := os.Getenv(EnvName("database-url")); v != "" {
		return v
	}
	return os.Getenv("DATABASE_URL")
}

// Load defines c's flags on fs and parses args over the environment over
// c's values (flag, then SKIPQ_* variable, then default). Empty variables
// count as unset.
func (c *Config) Load(fs *flag.FlagSet, args []string) error {
	if c.DatabaseURL == "" {
		c.DatabaseURL = os.Getenv("DATABASE_URL")
	}
	c.bind(fs)
	return ff.Parse(fs, args, ff.WithEnvVarPrefix(envPrefix))
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
	if c.AckDurability != "sync" && c.AckDurability != "async" {
		errs = append(errs, fmt.Errorf("SKIPQ_ACK_DURABILITY must be sync or async, not %q", c.AckDurability))
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
	if c.AuthFailureLimit < 0 || c.AuthFailureBurst < 0 {
		errs = append(errs, errors.New("SKIPQ_AUTH_FAILURE_LIMIT and SKIPQ_AUTH_FAILURE_BURST must not be negative"))
	}
	for _, p := range c.trustedProxies() {
		if net.ParseIP(p) == nil {
			if _, _, err := net.ParseCIDR(p); err != nil {
				errs = append(errs, fmt.Errorf("SKIPQ_TRUSTED_PROXIES: %q is neither an IP nor a CIDR", p))
			}
		}
	}
	for o := range strings.SplitSeq(c.PublicOrigin, ",") {
		if o = strings.TrimSpace(o); o != "" {
			if _, err := handlers.NormalizeOrigin(o); err != nil {
				errs = append(errs, fmt.Errorf("SKIPQ_PUBLIC_ORIGIN: %w", err))
			}
		}
	}
	if err := checkLoopback(c.PprofAddr); err != nil {
		errs = append(errs, fmt.Errorf("SKIPQ_PPROF_ADDR: %w", err))
	}
	if c.ConsoleSecret != "" && len(c.ConsoleSecret) < 32 {
		errs = append(errs, errors.New("SKIPQ_CONSOLE_SECRET must be at least 32 characters"))
	}
	if err := c.SQS.validate(c.trustedProxies()); err != nil {
		errs = append(errs, err)
	}
	if err := c.KubeMQ.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxRequestBytes < 1024 {
		errs = append(errs, errors.New("SKIPQ_MAX_REQUEST_BYTES must be at least 1024"))
	}
	if c.MaxInflightBytes != 0 && c.MaxInflightBytes < c.MaxRequestBytes {
		errs = append(errs, errors.New("SKIPQ_MAX_INFLIGHT_BYTES must be 0 (the default) or at least SKIPQ_MAX_REQUEST_BYTES, or no request of the largest size could ever be served"))
	}
	for _, lim := range c.limits() {
		if *lim.p < 1 {
			errs = append(errs, fmt.Errorf("%s must be at least 1", EnvName(lim.flag)))
		}
	}
	return errors.Join(errs...)
}

// checkLoopback accepts an empty address or one whose host is a loopback
// IP (not a name, which could resolve elsewhere): the profiles tell the node's code paths and, from
// the heap, fragments of bodies and keys, and they cost CPU to take, so
// they are never served beyond the machine (a tunnel reaches them).
func checkLoopback(addr string) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%q is not a loopback IP and port (127.0.0.1:PORT or [::1]:PORT)", addr)
}

// inflightPerRequest sizes the default SKIPQ_MAX_INFLIGHT_BYTES: room for
// this many requests of the largest size at once. Measured, a 16 MiB
// batch send being decoded and sent costs a node about 40 MiB of RSS, so
// at the defaults the budget keeps bodies to about 160 MiB.
const inflightPerRequest = 4

// maxInflightBytes is the effective budget of request bytes in flight.
func (c Config) maxInflightBytes() int64 {
	if c.MaxInflightBytes > 0 {
		return c.MaxInflightBytes
	}
	return inflightPerRequest * c.MaxRequestBytes
}

// rateBurst is the effective burst.
func (c Config) rateBurst() int {
	if c.RateBurst > 0 {
		return c.RateBurst
	}
	return max(1, int(c.RateLimit))
}

// trustedProxies is SKIPQ_TRUSTED_PROXIES as a list.
func (c Config) trustedProxies() []string { return commaList(c.TrustedProxies) }

// trustedProxyPrefixes is SKIPQ_TRUSTED_PROXIES as prefixes (an IP is a
// prefix of its full length); entries that are neither are left out
// (Validate refuses them).
func (c Config) trustedProxyPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range c.trustedProxies() {
		if a, err := netip.ParseAddr(p); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
		} else if pf, err := netip.ParsePrefix(p); err == nil {
			out = append(out, pf.Masked())
		}
	}
	return out
}

// publicOrigins are the origins whose pages may change state from a
// browser: SKIPQ_PUBLIC_ORIGIN; unset, with auth off, the loopback names at
// port (a page elsewhere must not drive a node that asks for no key); with
// auth on, nil: each request's own Host.
func (c Config) publicOrigins(port int) []string {
	var out []string
	for _, o := range commaList(c.PublicOrigin) {
		if n, err := handlers.NormalizeOrigin(o); err == nil { // validated at start
			out = append(out, n)
		}
	}
	if out == nil && c.Auth == "off" {
		for _, host := range []string{"localhost", "127.0.0.1", "[::1]"} {
			out = append(out, fmt.Sprintf("http://%s:%d", host, port))
		}
	}
	return out
}

// consoleSecret is the key console sessions and notices are signed with,
// never in the database: derived from SKIPQ_CONSOLE_SECRET, else from the
// SigV4 master key (which every node has the same of), else nil: the
// console picks a random one, which it logs as a warning when sessions
// need it (auth on).
func (c Config) consoleSecret(log *slog.Logger) ([]byte, error) {
	const label = "skipq console sessions"
	switch {
	case c.ConsoleSecret != "":
		log.Info("console sessions are signed with a key derived from SKIPQ_CONSOLE_SECRET")
		return hkdf.Key(sha256.New, []byte(c.ConsoleSecret), nil, label, 32)
	case c.SQS.MasterKey != "":
		master, err := sqs.ParseMasterKey(c.SQS.MasterKey)
		if err != nil {
			return nil, err
		}
		log.Info("console sessions are signed with a key derived from SKIPQ_SIGV4_MASTER_KEY")
		return hkdf.Key(sha256.New, master, nil, label, 32)
	case c.Auth != "off":
		log.Warn("SKIPQ_CONSOLE_SECRET and SKIPQ_SIGV4_MASTER_KEY are unset: console sessions are signed with a random key " +
			"of this process, so they do not survive a restart and hold on this node only; set SKIPQ_CONSOLE_SECRET, the same on every node")
	}
	return nil, nil
}

// commaList is a comma-separated setting's entries, trimmed, empty ones
// left out.
func commaList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (c Config) listenerURL() string {
	if c.ListenerDatabaseURL != "" {
		return c.ListenerDatabaseURL
	}
	return c.DatabaseURL
}

// LogValue is the startup log line's view, one attribute per setting under
// its environment variable's name: passwords and tokens masked.
func (c Config) LogValue() slog.Value {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	c.bind(fs) // flags over a copy: reading them changes nothing
	var attrs []slog.Attr
	fs.VisitAll(func(f *flag.Flag) {
		env, val := EnvName(f.Name), f.Value.String()
		switch {
		case strings.Contains(env, "DATABASE_URL"):
			val = maskURL(val)
		case (strings.HasSuffix(env, "_TOKEN") || strings.HasSuffix(env, "_KEY") || strings.HasSuffix(env, "_SECRET")) && val != "":
			val = "xxxxx"
		}
		attrs = append(attrs, slog.String(env, val))
	})
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
