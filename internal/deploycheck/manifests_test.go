package deploycheck_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const manifestsDir = "../../deploy/kubernetes"

// manifestsHeader opens every file of kubernetes/.
const manifestsHeader = "# Rendered from deploy/helm/skipq with its default values (release skipq) by\n" +
	"# `make manifests`; `make test` fails while they differ. Edit the chart, not this file.\n"

// TestPlainManifestsAreRendered: kubernetes/ is the chart's defaults as
// `helm template` renders them, a file per template, for users without
// Helm. SKIPQ_UPDATE_MANIFESTS=1 (make manifests) rewrites it.
func TestPlainManifestsAreRendered(t *testing.T) {
	want := map[string]string{} // file name → content
	for _, doc := range strings.Split(render(t, nil), "\n---\n") {
		source := ""
		for _, line := range strings.Split(doc, "\n") {
			if s, ok := strings.CutPrefix(line, "# Source: "); ok {
				source = s
			}
		}
		if strings.TrimSpace(strings.ReplaceAll(doc, "# Source: "+source, "")) == "" {
			continue // a template that rendered nothing
		}
		name := filepath.Base(source)
		if want[name] == "" {
			want[name] = manifestsHeader
		}
		want[name] += "---\n" + strings.TrimSpace(doc) + "\n"
	}

	if os.Getenv("SKIPQ_UPDATE_MANIFESTS") != "" {
		if err := os.RemoveAll(manifestsDir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(manifestsDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range want {
			if err := os.WriteFile(filepath.Join(manifestsDir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}

	entries, err := os.ReadDir(manifestsDir)
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, e := range entries {
		have = append(have, e.Name())
	}
	var names []string
	for name := range want {
		names = append(names, name)
	}
	slices.Sort(names)
	if !slices.Equal(have, names) {
		t.Fatalf("deploy/kubernetes holds %v; the chart renders %v: run make manifests", have, names)
	}
	for _, name := range names {
		got, err := os.ReadFile(filepath.Join(manifestsDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want[name] {
			t.Errorf("deploy/kubernetes/%s differs from the chart's rendering: run make manifests", name)
		}
	}
	// The files decode strictly too (the same objects as the defaults).
	for _, name := range names {
		decode(t, want[name])
	}
}
