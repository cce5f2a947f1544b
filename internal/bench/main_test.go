package bench_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/skipq/skipq/internal/bench"
)

// TestMain runs the scenario tests only with SKIPQ_TEST_BENCH=1, which
// `make check` sets: each drives real windows of load (about a minute and a
// half in all), too long for the loop `make test` is, and none asserts a
// speed. SKIPQ_TEST_PGMQ_SQL, pgmq's install file for the tests of the
// real pgmq baseline, runs them too (`-run Pgmq` picks those). The sqs
// scenario starts this test binary again as its node processes.
func TestMain(m *testing.M) {
	if bench.ServeNodeProcess() {
		return
	}
	if os.Getenv("SKIPQ_TEST_BENCH") == "" && os.Getenv("SKIPQ_TEST_PGMQ_SQL") == "" {
		fmt.Println("skipq-bench's scenario tests skipped: `make check` runs them (SKIPQ_TEST_BENCH=1)")
		os.Exit(0)
	}
	os.Exit(m.Run())
}
