// Package doccheck holds the repository's documentation to what it must
// say: every route of the OpenAPI document is in docs/API.md, and no file
// points to a specification outside the repository.
package doccheck

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

const root = "../.."

// TestAPIDocHasEveryRoute fails when a route of the OpenAPI document is
// missing from docs/API.md (as "METHOD /path", the path as the document
// spells it).
func TestAPIDocHasEveryRoute(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "internal/handlers/openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	api, err := os.ReadFile(filepath.Join(root, "docs/API.md"))
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]bool{"get": true, "put": true, "post": true, "delete": true, "patch": true, "head": true}
	for path, ops := range doc.Paths {
		for method := range ops {
			if !methods[method] {
				continue
			}
			route := strings.ToUpper(method) + " " + path
			if !strings.Contains(string(api), route) {
				t.Errorf("docs/API.md does not document %s", route)
			}
		}
	}
}

// The released migrations (00001-00035) keep the comments they shipped
// with: a migration is never edited once released, and
// internal/migrations/current/ is generated from them.
var releasedMigration = regexp.MustCompile(`^internal/migrations/(000(0[1-9]|[12][0-9]|3[0-5])_[^/]*\.sql|current/.*)$`)

// TestNoOutsideReferences fails when a file of the repository cites a
// section of the specification the project was first written against, or
// the folder of shared files beside the repository (both spelled out in
// forbidden): neither is in a clone, and the project's own docs are its
// reference.
func TestNoOutsideReferences(t *testing.T) {
	forbidden := []string{"SPEC" + " §", "../" + "shared"}
	for _, name := range repositoryFiles(t) {
		if releasedMigration.MatchString(name) {
			continue
		}
		text, err := os.ReadFile(filepath.Join(root, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree, not yet in git's index
		}
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(text), "\n")
		if strings.HasPrefix(name, "internal/migrations/") {
			// A migration's Down restores released function bodies word
			// for word, comments included (the catalog test compares them).
			for i, line := range lines {
				if strings.HasPrefix(line, "-- +goose Down") {
					lines = lines[:i]
					break
				}
			}
		}
		for _, f := range forbidden {
			for i, line := range lines {
				if strings.Contains(line, f) {
					t.Errorf("%s:%d: %q: point to the project's docs (docs/*.md) or say the rule", name, i+1, f)
				}
			}
		}
	}
}

// repositoryFiles lists the files git tracks, or, outside a git checkout,
// every file below the root but the build and cluster directories.
func repositoryFiles(t *testing.T) []string {
	t.Helper()
	if out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output(); err == nil {
		return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	}
	var names []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch name {
			case ".git", ".skipq", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		names = append(names, filepath.ToSlash(name))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// docAnchorRE finds a pointer to a section of a doc: docs/NAME.md#anchor
// anywhere, or NAME.md#anchor in a link inside docs/.
var docAnchorRE = regexp.MustCompile(`(?:docs/|\]\()([A-Z]+\.md)#([a-z0-9-]+)`)

// TestDocAnchorsExist fails when a pointer to a section of docs/*.md names
// a heading that is not there (renamed, moved or mistyped).
func TestDocAnchorsExist(t *testing.T) {
	anchors := map[string]map[string]bool{}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		anchors[filepath.Base(doc)] = headingAnchors(string(text))
	}
	for _, name := range repositoryFiles(t) {
		if releasedMigration.MatchString(name) {
			continue
		}
		text, err := os.ReadFile(filepath.Join(root, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(text), "\n") {
			for _, m := range docAnchorRE.FindAllStringSubmatch(line, -1) {
				doc, anchor := m[1], m[2]
				if have, ok := anchors[doc]; ok && !have[anchor] {
					t.Errorf("%s:%d: docs/%s has no section #%s", name, i+1, doc, anchor)
				}
			}
		}
	}
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown text: lower case, spaces to hyphens, punctuation dropped.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		anchors[b.String()] = true
	}
	return anchors
}
