// Command stopcluster stops the detached private cluster that
// devpg.EnsureDaemon started in a directory (`make test` uses it for
// .skipq/test once the tests are done), and any PgBouncer that a test process
// started in front of it and left behind (found by its pid file). Nothing
// running is not an error.
//
//	go run ./devpg/stopcluster .skipq/test
package main

import (
	"fmt"
	"os"

	"github.com/skipq/skipq/internal/devpg"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: stopcluster DIR")
		os.Exit(2)
	}
	if err := devpg.StopDaemon(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
