package service

import (
	"fmt"
	"testing"
)

// A batch send's validation of 100 valid messages without tags, as the
// lifecycle bench sends them.
func BenchmarkPrepareBatch(b *testing.B) {
	s := &Service{limits: DefaultLimits()}
	in := make([]MessageInput, 100)
	for i := range in {
		in[i] = MessageInput{Body: "skipq-bench-payload-0123456789abcdefghijklmnopqrstuvwxyz-0123456"}
	}
	pathOf := func(i int) string { return fmt.Sprintf("messages[%d]", i) }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.prepare("q", in, pathOf); err != nil {
			b.Fatal(err)
		}
	}
}
