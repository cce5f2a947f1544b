package node

import (
	"bytes"
	"encoding/base64"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
)

// The startup log line shows the configuration; secrets stay out of logs.
func TestLogValueMasksSecrets(t *testing.T) {
	c := DefaultConfig()
	c.DatabaseURL = "postgres://skipq:db-secret@db/skipq"
	c.MetricsToken = "scrape-secret"
	got := c.LogValue().String()
	for _, secret := range []string{"db-secret", "scrape-secret"} {
		if strings.Contains(got, secret) {
			t.Errorf("the logged configuration shows %q: %s", secret, got)
		}
	}
	if !strings.Contains(got, "SKIPQ_METRICS_TOKEN=xxxxx") {
		t.Errorf("the metrics token is not shown as set: %s", got)
	}
}

func TestMetricsTokenFromEnvAndFlag(t *testing.T) {
	t.Setenv("SKIPQ_METRICS_TOKEN", "from-env")
	c := DefaultConfig()
	if err := c.Load(newFlagSet(), nil); err != nil {
		t.Fatal(err)
	}
	if c.MetricsToken != "from-env" {
		t.Fatalf("MetricsToken = %q from the environment", c.MetricsToken)
	}
	c = DefaultConfig()
	if err := c.Load(newFlagSet(), []string{"--metrics-token", "from-flag"}); err != nil {
		t.Fatal(err)
	}
	if c.MetricsToken != "from-flag" {
		t.Fatalf("MetricsToken = %q, want the flag's", c.MetricsToken)
	}
}

func newFlagSet() *flag.FlagSet { return flag.NewFlagSet("serve", flag.ContinueOnError) }

// Several bad settings are reported together, always in the same order
// (the order of the flags' table), so a fix-and-retry loop converges.
func TestValidateReportsEveryErrorInAStableOrder(t *testing.T) {
	c := DefaultConfig()
	c.DatabaseURL = "postgres://db/skipq"
	c.Limits.MaxWaiters, c.Limits.MaxReceiveMessages, c.Limits.MaxResponseBytes = 0, 0, 0
	want := "SKIPQ_MAX_RECEIVE_MESSAGES must be at least 1\n" +
		"SKIPQ_MAX_RESPONSE_BYTES must be at least 1\n" +
		"SKIPQ_MAX_WAITERS must be at least 1"
	for range 5 {
		if err := c.Validate(); err == nil || err.Error() != want {
			t.Fatalf("Validate() = %v, want\n%s", err, want)
		}
	}
}

// A flag overrides its variable, which overrides the default; a variable
// that does not parse names itself.
func TestFlagsOverTheEnvironmentOverDefaults(t *testing.T) {
	t.Setenv("SKIPQ_DB_MAX_CONNS", "7")
	t.Setenv("SKIPQ_MAX_WAITERS", "9")
	c := DefaultConfig()
	if err := c.Load(newFlagSet(), []string{"--max-waiters", "11"}); err != nil {
		t.Fatal(err)
	}
	if c.DBMaxConns != 7 || c.Limits.MaxWaiters != 11 || c.ReadTimeout != DefaultConfig().ReadTimeout {
		t.Fatalf("db-max-conns %d (want 7 from the environment), max-waiters %d (want 11 from the flag), read timeout %d (want the default)",
			c.DBMaxConns, c.Limits.MaxWaiters, c.ReadTimeout)
	}
	t.Setenv("SKIPQ_RATE_LIMIT", "fast")
	c = DefaultConfig()
	if err := c.Load(newFlagSet(), nil); err == nil || !strings.Contains(err.Error(), "SKIPQ_RATE_LIMIT") {
		t.Fatalf("a rate limit of %q loaded with error %v", "fast", err)
	}
}

// SKIPQ_CONSOLE=false turns the web console off.
func TestConsoleFromEnv(t *testing.T) {
	c := DefaultConfig()
	if !c.Console {
		t.Fatal("the console is off by default")
	}
	t.Setenv("SKIPQ_CONSOLE", "false")
	if err := c.Load(newFlagSet(), nil); err != nil {
		t.Fatal(err)
	}
	if c.Console {
		t.Fatal("SKIPQ_CONSOLE=false left the console on")
	}
}

// SKIPQ_TRUST_PROXY believes forwarded headers only from the proxies of
// SKIPQ_TRUSTED_PROXIES; alone it is refused rather than silently doing
// nothing.
func TestTrustProxyNeedsTrustedProxies(t *testing.T) {
	c := DefaultConfig()
	c.DatabaseURL = "postgres://db/skipq"
	c.SQS.TrustProxy = true
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "SKIPQ_TRUST_PROXY needs SKIPQ_TRUSTED_PROXIES") {
		t.Fatalf("Validate() = %v", err)
	}
	c.TrustedProxies = "10.0.0.0/8"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// Console sessions are signed with a key that is not in the database: from
// SKIPQ_CONSOLE_SECRET, else the SigV4 master key (each under its own
// label), else a random one of the process, which the log says.
func TestConsoleSecret(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	c := DefaultConfig()
	if key, err := c.consoleSecret(log); err != nil || key != nil || !strings.Contains(logged.String(), "do not survive a restart") {
		t.Fatalf("unset: %x %v, logged %q", key, err, logged.String())
	}
	c.SQS.MasterKey = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	fromMaster, err := c.consoleSecret(log)
	if err != nil || len(fromMaster) != 32 || bytes.Contains(fromMaster, bytes.Repeat([]byte{7}, 8)) {
		t.Fatalf("from the master key: %x %v", fromMaster, err)
	}
	c.ConsoleSecret = strings.Repeat("s", 32)
	own, err := c.consoleSecret(log)
	if err != nil || len(own) != 32 || bytes.Equal(own, fromMaster) {
		t.Fatalf("SKIPQ_CONSOLE_SECRET: %x %v", own, err)
	}
	if again, _ := c.consoleSecret(log); !bytes.Equal(again, own) {
		t.Fatal("the same secret gives another key: nodes would not share sessions")
	}
	if got := c.LogValue().String(); strings.Contains(got, c.ConsoleSecret) || !strings.Contains(got, "SKIPQ_CONSOLE_SECRET=xxxxx") {
		t.Errorf("the logged configuration: %s", got)
	}
	c.ConsoleSecret = "short"
	c.PublicOrigin = "https://ok.example, ftp://files.example, http://x.example/path"
	c.DatabaseURL = "postgres://db/skipq"
	err = c.Validate()
	for _, want := range []string{"SKIPQ_CONSOLE_SECRET must be at least 32", `"ftp://files.example" is not an origin`, `"http://x.example/path" is not an origin`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want %q", err, want)
		}
	}
}

// SKIPQ_MAX_INFLIGHT_BYTES defaults to a multiple of the request limit and,
// when set, must hold at least one request of the largest size.
func TestMaxInflightBytes(t *testing.T) {
	t.Setenv("SKIPQ_MAX_REQUEST_BYTES", "1048576")
	c := DefaultConfig()
	c.DatabaseURL = "postgres://db/skipq"
	if err := c.Load(flag.NewFlagSet("", flag.ContinueOnError), nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil || c.maxInflightBytes() != inflightPerRequest<<20 {
		t.Fatalf("default: %v %d", err, c.maxInflightBytes())
	}
	t.Setenv("SKIPQ_MAX_INFLIGHT_BYTES", "1048575")
	c = DefaultConfig()
	c.DatabaseURL = "postgres://db/skipq"
	if err := c.Load(flag.NewFlagSet("", flag.ContinueOnError), nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "SKIPQ_MAX_INFLIGHT_BYTES") {
		t.Fatalf("below the request limit: %v", err)
	}
}

// The runtime profiles are served on a loopback IP only, and only when set.
func TestPprofAddrIsLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{
		"": true, "127.0.0.1:6060": true, "[::1]:6060": true, "127.0.0.2:0": true,
		":6060": false, "0.0.0.0:6060": false, "[::]:6060": false, "10.0.0.1:6060": false,
		"localhost:6060": false, "127.0.0.1": false, "example.com:6060": false,
	} {
		c := DefaultConfig()
		c.DatabaseURL = "postgres://db/skipq"
		c.PprofAddr = addr
		if err := c.Validate(); (err == nil) != ok {
			t.Errorf("SKIPQ_PPROF_ADDR=%q: Validate() = %v, want accepted %v", addr, err, ok)
		}
	}
}

// A node's profile server answers with Go's profiles.
func TestServePprof(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := servePprof(ln, slog.New(slog.DiscardHandler))
	defer func() { _ = srv.Close() }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "heap profile:") {
		t.Fatalf("GET /debug/pprof/heap: %d %.200s", resp.StatusCode, body)
	}
}
