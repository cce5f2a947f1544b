package wire

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Time's hand-written encoding writes what time's AppendFormat writes in
// TimeFormat, at the ends of the four-digit years too, and allocates only
// its answer.
func TestTimeMarshalsAsTimeFormat(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	times := []time.Time{
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2026, 12, 2, 1, 55, 0, 123456789, time.FixedZone("x", 5*3600+1800)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), // past four digits: the general path
		{},
	}
	for range 10000 {
		times = append(times, time.Unix(r.Int64N(1<<36), r.Int64N(1e9)))
	}
	for _, tm := range times {
		got, err := At(tm).MarshalJSON()
		want := `"` + tm.UTC().Format(TimeFormat) + `"`
		if err != nil || string(got) != want {
			t.Fatalf("%v: %s, want %s (%v)", tm, got, want, err)
		}
	}
	now := At(time.Now())
	if n := testing.AllocsPerRun(100, func() { _, _ = now.MarshalJSON() }); n > 1 {
		t.Fatalf("MarshalJSON allocates %v times, want 1", n)
	}
}
