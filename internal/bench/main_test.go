package bench_test

import (
	"fmt"
	"os"
	"testing"
)

// TestMain runs the scenario tests only with SKIPQ_TEST_BENCH=1, which
// `make check` sets: each drives real windows of load (about a minute and a
// half in all), too long for the loop `make test` is, and none asserts a
// speed.
func TestMain(m *testing.M) {
	if os.Getenv("SKIPQ_TEST_BENCH") == "" {
		fmt.Println("skipq-bench's scenario tests skipped: `make check` runs them (SKIPQ_TEST_BENCH=1)")
		os.Exit(0)
	}
	os.Exit(m.Run())
}
