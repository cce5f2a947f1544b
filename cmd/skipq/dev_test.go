package main

import (
	"strings"
	"testing"

	"github.com/skipq/skipq/internal/node"
)

// What `make run` prints names the console and how auth is set.
func TestDevBanner(t *testing.T) {
	cfg := node.DefaultConfig()
	cfg.Console, cfg.Auth, cfg.DatabaseURL = true, "off", "postgres://dev"
	got := devBanner(cfg, "127.0.0.1:8080")
	for _, want := range []string{"API:      http://127.0.0.1:8080", "console:  http://127.0.0.1:8080/console/", "database: postgres://dev", "-auth required"} {
		if !strings.Contains(got, want) {
			t.Errorf("banner lacks %q:\n%s", want, got)
		}
	}
	cfg.Auth, cfg.Console = "required", false
	if got := devBanner(cfg, "127.0.0.1:8080"); strings.Contains(got, "console:") || !strings.Contains(got, "skipq keys create") {
		t.Errorf("banner with auth on and no console:\n%s", got)
	}
}
