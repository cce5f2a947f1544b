package service

import (
	"slices"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/db"
)

// A queue whose walk ran out of budget was not read past its last row: the
// page stops there even when other queues matched later rows, and the
// cursor goes on from that row, even on an empty page.
func TestSearchPageStopsAtTheFirstWalkEnd(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1_700_000_000-int64(s), 0) } // larger s = older
	row := func(queue string, seq int64, age int, matched, exhausted bool) db.MessageSearchWalkRow {
		return db.MessageSearchWalkRow{QueueName: queue, Sequence: seq, SentAt: at(age), Matched: matched, Exhausted: exhausted, Size: 10}
	}
	walked := []db.MessageSearchWalkRow{
		row("b", 20, 1, true, false),
		row("a", 11, 2, false, false), // not returned by the walk in practice; harmless
		row("a", 12, 3, false, true),  // a's walk ended here
		row("b", 21, 4, true, false),  // past a's end: not on this page
	}
	page, next := searchPage(walked, 10, 1<<20)
	if len(page) != 1 || page[0].Sequence != 20 {
		t.Fatalf("page %v, want only b/20", page)
	}
	k, err := decodeSearchCursor(next)
	if err != nil || k == nil || *k != keyOf(walked[2]) {
		t.Fatalf("cursor %q (%v) = %+v, want a's last row", next, err, k)
	}
	// Nothing matched before the walk end: an empty page that goes on.
	page, next = searchPage(walked[1:3], 10, 1<<20)
	if len(page) != 0 || next == "" {
		t.Fatalf("page %v, cursor %q: want an empty page with a cursor", page, next)
	}
	// No walk ended: every match, newest first, then the limit's cursor.
	page, next = searchPage([]db.MessageSearchWalkRow{row("b", 21, 4, true, false), row("b", 20, 1, true, false), row("a", 5, 1, true, false)}, 2, 1<<20)
	got := []int64{page[0].Sequence, page[1].Sequence}
	if !slices.Equal(got, []int64{5, 20}) || next == "" {
		t.Fatalf("page %v cursor %q: want a/5 then b/20 (same sentAt: queue name order) and a cursor", got, next)
	}
	if _, next = searchPage(page, 2, 1<<20); next != "" {
		t.Fatalf("a complete last page has cursor %q", next)
	}
	// The response budget cuts a page after the row that reaches it.
	if page, next = searchPage(walked[:1], 10, 1); len(page) != 1 || next != "" {
		t.Fatalf("a single row over the budget: page %v cursor %q, want it alone and no cursor", page, next)
	}
}
