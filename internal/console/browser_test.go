package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/skipq/skipq/internal/testport"
)

// The browser tests drive Debian's chromium-headless-shell (make
// browser-bin installs it) with chromedp: one browser per test binary, one
// isolated browser context (cookies included) per test.

// browserPaths are where a headless Chromium may be; chromedp's own lookup
// does not know Debian's chromium-headless-shell.
var browserPaths = []string{"chromium-headless-shell", "/usr/bin/chromium-headless-shell",
	"headless_shell", "chromium", "chromium-browser"}

var (
	browserOnce  sync.Once
	browserCtx   context.Context
	browserError error
	stopBrowser  = func() {}
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopBrowser()
	os.Exit(code)
}

// findBrowser is the path of a headless Chromium, or "".
func findBrowser() string {
	for _, p := range browserPaths {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	return ""
}

// browser starts (once) the shared browser and returns a fresh tab in its
// own browser context. Without a browser the test is skipped, or fails
// under CI=true, where make test installs one.
func browser(t *testing.T) context.Context {
	t.Helper()
	browserOnce.Do(func() {
		path := findBrowser()
		if path == "" {
			browserError = fmt.Errorf("no headless Chromium found (tried %s); `make browser-bin` installs chromium-headless-shell",
				strings.Join(browserPaths, ", "))
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path),
			chromedp.NoSandbox, // tests run as root in CI
			chromedp.DisableGPU,
			chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.WindowSize(1280, 900),
			// chromedp talks to the browser over a pipe: no debugging port.
		)
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancelBrowser := chromedp.NewContext(alloc)
		if err := chromedp.Do(ctx); err != nil {
			cancelBrowser()
			cancelAlloc()
			browserError = fmt.Errorf("start %s: %w", path, err)
			return
		}
		browserCtx = ctx
		stopBrowser = func() { cancelBrowser(); cancelAlloc() }
	})
	if browserError != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(browserError)
		}
		t.Skip(browserError)
	}
	tab, cancel := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	tab, cancelTimeout := context.WithTimeout(tab, 60*time.Second)
	t.Cleanup(cancelTimeout)
	return tab
}

// freePort is a loopback port in the console tests' range that nothing
// listens on now.
func freePort(t testing.TB) int { return testport.Free(t, 21000) }

// watcher records every URL a tab requests and every error its pages
// report (a CSP violation, a script exception).
type watcher struct {
	mu     sync.Mutex
	urls   []string
	errors []string
}

func watch(t *testing.T, tab context.Context) *watcher {
	t.Helper()
	w := &watcher{}
	if err := chromedp.Listen(tab, func(ev any) {
		w.mu.Lock()
		defer w.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			w.urls = append(w.urls, e.Request.URL)
		case *cdplog.EventEntryAdded:
			// Responses with an error status are logged by the network
			// source; the tests cause some on purpose.
			if e.Entry.Level == cdplog.EntryLevelError && e.Entry.Source != cdplog.EntrySourceNetwork {
				w.errors = append(w.errors, string(e.Entry.Source)+": "+e.Entry.Text)
			}
		case *runtime.EventExceptionThrown:
			w.errors = append(w.errors, "exception: "+e.ExceptionDetails.Text)
		}
	}); err != nil {
		t.Fatal(err)
	}
	for _, enable := range []func() error{
		func() error { _, err := chromedp.Call(tab, network.Enable, network.EnableParams{}); return err },
		func() error { _, err := chromedp.Call(tab, cdplog.Enable, cdp.Empty{}); return err },
		func() error { _, err := chromedp.Call(tab, runtime.Enable, cdp.Empty{}); return err },
	} {
		if err := enable(); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// clean fails the test if the tab requested anything but base's URLs or a
// page reported an error.
func (w *watcher) clean(t *testing.T, base string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.urls) == 0 {
		t.Fatal("no request was seen")
	}
	for _, u := range w.urls {
		if !strings.HasPrefix(u, base+"/") {
			t.Errorf("the page requested %s, outside the node %s", u, base)
		}
	}
	for _, e := range w.errors {
		t.Errorf("a page reported %s", e)
	}
}

// do runs browser steps, failing the test with what went wrong.
func do(t *testing.T, tab context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(tab, steps...); err != nil {
		t.Fatal(err)
	}
}

func run[T any](t *testing.T, tab context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(tab, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// submit clicks a control that loads a new page and waits for that page
// to have loaded whole: a page's first rows are visible while the rest of
// its table is still being parsed, so a count taken then comes up short.
func submit(t *testing.T, tab context.Context, sel string) {
	t.Helper()
	do(t, tab, chromedp.Evaluate[chromedp.Void](`document.body.dataset.stale = "1"`),
		chromedp.Click(sel), chromedp.WaitVisible(`body:not([data-stale])`))
	poll(t, tab, `document.readyState === "complete"`, 10*time.Second)
}

func testID(id string) string { return fmt.Sprintf(`[data-testid="%s"]`, id) }

// text is the trimmed text of the first element matching sel.
func text(t *testing.T, tab context.Context, sel string) string {
	t.Helper()
	return strings.TrimSpace(run(t, tab, chromedp.Text(sel)))
}

// count is how many elements match a CSS selector now.
func count(t *testing.T, tab context.Context, css string) int {
	t.Helper()
	return run(t, tab, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", css)))
}

// poll waits until a JavaScript expression is true in the page.
func poll(t *testing.T, tab context.Context, expr string, timeout time.Duration) {
	t.Helper()
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(100*time.Millisecond),
		chromedp.WithPollingTimeout(timeout))); err != nil {
		t.Fatalf("waiting for %s: %v", expr, err)
	}
}

// screenshot writes a full-page PNG for a person to look at: under
// SKIPQ_SCREENSHOTS (make screenshots: docs/console) or the test's temp
// directory.
func screenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	save(t, name, run(t, tab, chromedp.FullScreenshot(100)))
}

// screenshotTop is screenshot of the window only, for long pages.
func screenshotTop(t *testing.T, tab context.Context, name string) {
	t.Helper()
	save(t, name, run(t, tab, chromedp.CaptureScreenshot()))
}

func save(t *testing.T, name string, png []byte) {
	t.Helper()
	dir := os.Getenv("SKIPQ_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "skipq-console")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
