package service_test

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/testdb"
)

// A search reads at most its budget of index entries (20,000) whatever
// the page size and the number of queues: 1,000 queues of 25 messages,
// each queue newer than the ones walked before it (so that no queue is cut
// short by the ones before), a page of 1,000. The walk before read a page
// per queue, all 25,000. Paging the prefix visits every message once, in
// search order.
func TestSearchReadsAtMostItsBudget(t *testing.T) {
	svc, clk, pool := newService(t)
	ctx := context.Background()
	const queues, perQueue, budget = 1000, 25, 20000
	base := clk.now().Truncate(time.Millisecond)
	type sent struct {
		queue string
		id    string
		at    time.Time
		seq   int64
	}
	var all []sent
	for i := range queues {
		// Three queues share each sentAt, and names order otherwise than
		// creation ("b.10" < "b.2").
		clk.advance(base.Add(time.Duration(i/3) * time.Millisecond).Sub(clk.now()))
		q := fmt.Sprintf("b.%d", i)
		batch := make([]service.MessageInput, perQueue)
		for k := range batch {
			batch[k] = service.MessageInput{Body: fmt.Sprint(k)}
		}
		res, err := svc.SendBatch(ctx, "default", q, batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			all = append(all, sent{queue: q, id: r.MessageID, at: r.SentAt, seq: r.Sequence})
		}
	}
	slices.SortFunc(all, func(a, b sent) int {
		return cmp.Or(b.at.Compare(a.at), cmp.Compare(a.queue, b.queue), cmp.Compare(a.seq, b.seq))
	})

	read := explainedIndexReads(t, pool.Config().ConnString(), clk, "messages_queue_sent_idx",
		service.SearchOptions{QueuePrefix: "b.", Limit: 1000})
	t.Logf("the first page read %d index entries", read)
	if read == 0 || read > budget {
		t.Errorf("the first page read %d entries of messages_queue_sent_idx, want 1 to %d", read, budget)
	}

	got := searchAll(t, svc, service.SearchOptions{QueuePrefix: "b.", Limit: 1000}, len(all))
	want := make([]string, len(all))
	for i, m := range all {
		want[i] = m.id
	}
	if !slices.Equal(got, want) {
		t.Errorf("paging got %d messages, want each of %d once in search order", len(got), len(want))
	}
}

// explainedIndexReads runs one search page on a connection of its own that
// has auto_explain report every statement's plan (the walk's per-queue
// statements too), and sums the index entries the scans of index read:
// the rows they returned and those their filter removed (per-loop
// averages, rounded, times the loops: within half a row per loop).
func explainedIndexReads(t *testing.T, url string, clk *clock, index string, o service.SearchOptions) int {
	t.Helper()
	pool, explained := testdb.Explained(t, url)
	svc := service.New(pool, service.Options{Limits: service.DefaultLimits(), Clock: clk.now})
	if _, _, err := svc.SearchMessages(context.Background(), "default", o); err != nil {
		t.Fatal(err)
	}
	notices := explained()
	scan := regexp.MustCompile(`Index (?:Only )?Scan (?:Backward )?using ` + regexp.QuoteMeta(index) + `\b.*\(actual time=\S+ rows=(\d+) loops=(\d+)\)`)
	removed := regexp.MustCompile(`^\s*Rows Removed by (?:Index Recheck|Filter): (\d+)`)
	total := 0
	for _, n := range notices {
		in := false
		for _, line := range strings.Split(n, "\n") {
			if m := scan.FindStringSubmatch(line); m != nil {
				rows, _ := strconv.Atoi(m[1])
				loops, _ := strconv.Atoi(m[2])
				total += rows * loops
				in = true
				continue
			}
			if strings.Contains(line, "->") {
				in = false
			}
			if m := removed.FindStringSubmatch(line); in && m != nil {
				rows, _ := strconv.Atoi(m[1])
				total += rows
			}
		}
	}
	return total
}
