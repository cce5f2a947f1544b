package node

import (
	"flag"
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
