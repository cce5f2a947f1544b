package db_test

import (
	"context"
	"slices"
	"testing"

	"github.com/skipq/skipq/internal/db"
)

// skipq.group_prune walks the groups a window at a time: each call prunes
// the empty groups of the next window, stops at the last one pruned when it
// pruned its maximum, and starts over after the table's end.
func TestGroupPruneWalksWindows(t *testing.T) {
	f := setupFIFO(t)
	ctx := context.Background()
	sendGrouped(t, f.q, []string{"m2", "m4"}, []string{"g2", "g4"})
	// Empty groups as a purge leaves them: rows without messages.
	if _, err := f.pool.Exec(ctx, `INSERT INTO skipq.message_groups (queue_id, group_id)
		SELECT q.id, g FROM skipq.queues q, unnest(ARRAY['g1', 'g3', 'g5', 'g6', 'g7']) g WHERE q.name = 'q'`); err != nil {
		t.Fatal(err)
	}
	groups := func() []string {
		t.Helper()
		var gs []string
		rows, err := f.pool.Query(ctx, `SELECT group_id FROM skipq.message_groups ORDER BY group_id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var g string
			if err := rows.Scan(&g); err != nil {
				t.Fatal(err)
			}
			gs = append(gs, g)
		}
		return gs
	}
	var p db.GroupPruneParams
	step := func(max, scan int32, pruned int32, next string, left ...string) {
		t.Helper()
		p.MaxGroups, p.ScanGroups = max, scan
		r, err := f.q.GroupPrune(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if r.NextGroupID != nil {
			got = *r.NextGroupID
		}
		if r.Pruned != pruned || got != next || !slices.Equal(groups(), left) {
			t.Fatalf("after %+v: pruned %d, next %q, groups %v; want %d, %q, %v", p, r.Pruned, got, groups(), pruned, next, left)
		}
		p.AfterQueueID, p.AfterGroupID = r.NextQueueID, r.NextGroupID
	}
	step(10, 2, 1, "g2", "g2", "g3", "g4", "g5", "g6", "g7") // window g1 g2
	step(10, 2, 1, "g4", "g2", "g4", "g5", "g6", "g7")       // window g3 g4
	step(1, 3, 1, "g5", "g2", "g4", "g6", "g7")              // window g5 g6 g7, stops at its maximum
	step(10, 3, 2, "", "g2", "g4")                           // the rest: fewer than the window, wraps
	step(10, 3, 0, "", "g2", "g4")                           // from the start: nothing to prune
}
