package service

import (
	"regexp"
	"strings"
	"testing"
)

// The id and tag key rules as docs/API.md states them.
var (
	idRule     = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
	tagKeyRule = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
)

func FuzzIDAndTagKey(f *testing.F) {
	for _, id := range []string{"", "req-1", "a.b_c:d-e", "A9", "a b", "a/b", "é", "\x00", "a\n", "a*b",
		strings.Repeat("x", 64), strings.Repeat("x", 65), strings.Repeat("x", 128), strings.Repeat("x", 129), "0194c5a2-7c1e-7c3a-9b7e-2f0c1d9e8a01"} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := IsID(id), idRule.MatchString(id); got != want {
			t.Fatalf("%q: IsID %v, the rule says %v", id, got, want)
		}
		if got, want := IsTagKey(id), tagKeyRule.MatchString(id); got != want {
			t.Fatalf("%q: IsTagKey %v, the rule says %v", id, got, want)
		}
	})
}

// The check of a Go client's request id (24 hex digits), by the rule's
// regexp as it was done and by IsID.
func BenchmarkIsID(b *testing.B) {
	const id = "8f3a9c0d1e2b4a5f6c7d8e9f"
	b.Run("regexp", func(b *testing.B) {
		for b.Loop() {
			if !idRule.MatchString(id) {
				b.Fatal(id)
			}
		}
	})
	b.Run("IsID", func(b *testing.B) {
		for b.Loop() {
			if !IsID(id) {
				b.Fatal(id)
			}
		}
	})
}
