// Package testport hands tests loopback ports that nothing listens on, each
// test package from a range of its own below 32768. Not ports the system
// picks (port 0): those come from the ephemeral range, where another
// process's outgoing connection can take the port between the check and
// the listen that follows it, and two packages testing at once could be
// handed the same one.
//
// The ranges in use: console 21000, failover 22000 (fixed ports),
// kubemq 23000, chaos 24000, deploycheck 25000, devpg 26000, this
// package's own test 27000 — 1,000 ports each.
package testport

import (
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"testing"
)

// Width is the number of ports in each package's range.
const Width = 1000

var next atomic.Int32

// Free is a port in first … first+Width-1 that nothing on 127.0.0.1
// listens on now. Processes start at different places in the range (by
// process id), and calls within one process take the ports in turn.
func Free(t testing.TB, first int) int {
	t.Helper()
	start := int32(os.Getpid() % Width)
	for range Width {
		p := first + int((start+next.Add(1))%Width)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err == nil {
			_ = ln.Close()
			return p
		}
	}
	t.Fatalf("no free port in %d-%d", first, first+Width-1)
	return 0
}
