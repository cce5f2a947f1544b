package service_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/service"
)

// The walk's cut (migration 00029) stops each queue at the oldest of the
// matches the queues before it hold: paging through many queues whose
// sentAt interleave, tie, and run against their sequences visits every
// matching message once, in search order, at every page size, with a
// filter and with a group.
func TestSearchPagesAcrossInterleavedQueues(t *testing.T) {
	svc, clk, _ := newService(t)
	ctx := context.Background()
	base := clk.now().Truncate(time.Millisecond)
	type sent struct {
		queue, id, group string
		at               time.Time
		seq              int64
		odd              bool
	}
	var all []sent
	queues := []string{"w.a", "w.b", "w.c", "w.d", "w.e", "w.f", "w.g"}
	for _, q := range []string{"w.f", "w.g"} {
		if _, _, err := svc.PutQueue(ctx, "default", q, service.QueueSettings{FIFO: new(true)}); err != nil {
			t.Fatal(err)
		}
	}
	for step := range 40 {
		// Out of step with the sequences, with ties across queues and
		// within one.
		at := base.Add(time.Duration(step*17%23) * time.Millisecond)
		clk.advance(at.Sub(clk.now()))
		for qi, q := range queues {
			if (step+qi)%3 == 0 {
				continue
			}
			var batch []service.MessageInput
			for k := range 1 + (step+qi)%2 {
				m := service.MessageInput{Body: fmt.Sprintf("%d-%d-%d", step, qi, k), Tags: map[string]string{}}
				if (step+k)%2 == 1 {
					m.Tags["odd"] = "1"
				}
				if q == "w.f" || q == "w.g" {
					m.GroupID = fmt.Sprintf("g%d", (step+k)%2)
				}
				batch = append(batch, m)
			}
			res, err := svc.SendBatch(ctx, "default", q, batch)
			if err != nil {
				t.Fatal(err)
			}
			for k, r := range res {
				all = append(all, sent{queue: q, id: r.MessageID, group: batch[k].GroupID, at: r.SentAt, seq: r.Sequence, odd: batch[k].Tags["odd"] == "1"})
			}
		}
	}
	slices.SortFunc(all, func(a, b sent) int {
		return cmp.Or(b.at.Compare(a.at), cmp.Compare(a.queue, b.queue), cmp.Compare(a.seq, b.seq))
	})
	for _, c := range []struct {
		name string
		o    service.SearchOptions
		keep func(sent) bool
	}{
		{"all", service.SearchOptions{}, func(sent) bool { return true }},
		{"tag odd", service.SearchOptions{Tags: map[string]string{"odd": "1"}}, func(m sent) bool { return m.odd }},
		{"group g1", service.SearchOptions{GroupID: "g1"}, func(m sent) bool { return m.group == "g1" }},
	} {
		var want []string
		for _, m := range all {
			if c.keep(m) {
				want = append(want, m.id)
			}
		}
		for _, limit := range []int{1, 3, 10, 100} {
			o := c.o
			o.Limit = limit
			got := searchAll(t, svc, o, len(want))
			if !slices.Equal(got, want) {
				t.Errorf("%s limit %d: got %d messages %v, want %d %v", c.name, limit, len(got), got, len(want), want)
			}
		}
	}
}

// searchAll pages through a search to its end and returns the messages'
// ids in the order the pages gave them. It fails the test past one page
// more than total messages (a cursor that does not move on).
func searchAll(t *testing.T, svc *service.Service, o service.SearchOptions, total int) []string {
	t.Helper()
	var got []string
	for pages := 0; ; pages++ {
		if pages > total+1 {
			t.Fatalf("limit %d: more pages than messages", o.Limit)
		}
		msgs, next, err := svc.SearchMessages(context.Background(), "default", o)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			got = append(got, m.MessageID)
		}
		if next == "" {
			return got
		}
		o.Cursor = next
	}
}
