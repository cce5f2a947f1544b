package worker

import "testing"

// A vacuum waits for its floor of dead rows, and on a large table for one
// dead row per vacuumLiveShare live ones.
func TestWorthVacuum(t *testing.T) {
	for _, c := range []struct {
		dead, live int64
		want       bool
	}{
		{999, 0, false},
		{1000, 0, true},
		{1000, 10_000, true},
		{1000, 1_000_000, false},
		{99_999, 1_000_000, false},
		{100_000, 1_000_000, true},
	} {
		if got := worthVacuum(c.dead, c.live, 1000); got != c.want {
			t.Errorf("worthVacuum(%d dead, %d live) = %v, want %v", c.dead, c.live, got, c.want)
		}
	}
}
