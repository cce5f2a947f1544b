package testport_test

import (
	"fmt"
	"net"
	"testing"

	"github.com/skipq/skipq/internal/testport"
)

// A port handed out is in the range and free; one taken is not handed out
// again while it is held.
func TestFreeSkipsPortsInUse(t *testing.T) {
	const first = 27000
	held := map[int]net.Listener{}
	t.Cleanup(func() {
		for _, ln := range held {
			_ = ln.Close()
		}
	})
	for range 20 {
		p := testport.Free(t, first)
		if p < first || p >= first+testport.Width {
			t.Fatalf("port %d outside %d-%d", p, first, first+testport.Width-1)
		}
		if _, dup := held[p]; dup {
			t.Fatalf("port %d handed out while it was held", p)
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("port %d was handed out but cannot be listened on: %v", p, err)
		}
		held[p] = ln
	}
}
