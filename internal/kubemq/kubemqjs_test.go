package kubemq_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/node"
)

// jsDir is where the test installs kubemq-js (npm, once per machine):
// beside the test cluster, out of the repository's files.
const jsDir = "../../.skipq/kubemq-js"

// needJS installs testdata/kubemq-js's package (kubemq-js 1.2.3) with npm
// unless it is there, and returns the directory to run node in. Without
// node or npm the test skips, or fails under CI=true.
func needJS(t *testing.T) string {
	t.Helper()
	unusable := func(msg string) {
		t.Helper()
		msg += "; the kubemq-js test needs node and npm"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			unusable(tool + " is not installed")
		}
	}
	dir, err := filepath.Abs(jsDir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/kubemq-js/package.json")
	if err != nil {
		t.Fatal(err)
	}
	have, _ := os.ReadFile(filepath.Join(dir, "package.json"))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kubemq-js")); err != nil || !bytes.Equal(have, want) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "package.json"), want, 0o644); err != nil {
			t.Fatal(err)
		}
		c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(c, "npm", "install", "--no-audit", "--no-fund", "--no-package-lock")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			unusable("npm install kubemq-js failed: " + err.Error() + "\n" + string(out))
		}
	}
	script, err := os.ReadFile("testdata/kubemq-js/check.js")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "check.js"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The Node SDK kubemq-js 1.2.3, unchanged, with an API key: send, batch,
// pull, peek, ackAll, transaction (ack, reject, extendVisibility,
// resendToChannel, resendNewMessage) and transactionStream
// (testdata/kubemq-js/check.js).
func TestKubemqJS(t *testing.T) {
	dir := needJS(t)
	e := newNode(t, func(c *node.Config) { c.Auth = "required" })
	pool, err := db.NewPool(context.Background(), e.DB, db.PoolOptions{MaxConns: 2, ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	_, token, err := auth.New(pool, 0).Create(context.Background(), "js", "write", "kubemq-js")
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, "node", "check.js", e.Addr, token)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "OK") {
		t.Fatalf("kubemq-js: %v\n%s", err, out)
	}
}
