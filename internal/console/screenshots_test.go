package console_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The pictures of docs/console/ are taken by the browser tests (make
// screenshots). docs/console/SHA256SUMS records, when they were taken, the
// SHA-256 of every page template and the style sheet (what the pictures
// show) and of the pictures themselves, in sha256sum's format from the
// repository's root. A change of a template or of the CSS without new
// pictures fails TestScreenshotsAreCurrent.

const (
	repoRoot        = "../.."
	screenshotsDir  = "docs/console"
	screenshotsSums = screenshotsDir + "/SHA256SUMS"
)

// screenshotSums are the lines of SHA256SUMS for the files as they are now,
// sorted by path.
func screenshotSums(t *testing.T) []string {
	t.Helper()
	var paths []string
	for _, pattern := range []string{"internal/console/templates/*.html", "internal/console/static/console.css", screenshotsDir + "/*.png"} {
		found, err := filepath.Glob(filepath.Join(repoRoot, pattern))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, found...)
	}
	var lines []string
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(raw)
		lines = append(lines, hex.EncodeToString(sum[:])+"  "+filepath.ToSlash(rel))
	}
	slices.SortFunc(lines, func(a, b string) int { return strings.Compare(a[66:], b[66:]) })
	return lines
}

// The pictures are as new as the pages: SKIPQ_UPDATE_SCREENSHOT_SUMS=1
// (make screenshots, after taking them) records the sums instead.
func TestScreenshotsAreCurrent(t *testing.T) {
	now := screenshotSums(t)
	path := filepath.Join(repoRoot, screenshotsSums)
	if os.Getenv("SKIPQ_UPDATE_SCREENSHOT_SUMS") == "1" {
		if err := os.WriteFile(path, []byte(strings.Join(now, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: make screenshots writes it with the pictures", err)
	}
	recorded := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	var stale []string
	for _, line := range now {
		if !slices.Contains(recorded, line) {
			stale = append(stale, "changed or new: "+line[66:])
		}
	}
	for _, line := range recorded {
		if len(line) > 66 && !slices.ContainsFunc(now, func(l string) bool { return l[66:] == line[66:] }) {
			stale = append(stale, "gone: "+line[66:])
		}
	}
	if len(stale) > 0 {
		t.Fatalf("the console's pages changed since the pictures in %s were taken:\n\t%s\nrun `make screenshots` and commit the pictures with %s",
			screenshotsDir, strings.Join(stale, "\n\t"), screenshotsSums)
	}
}
