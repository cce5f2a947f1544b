package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/db"
)

// Each position of a send is answered with its own message: the function
// pairs the positions sent with the sequences it drew for them, in
// position order, skipping the positions that are duplicates, and each
// message is ready or has a timer as its delay says.
func TestMessageInsertAnswersEachPositionWithItsMessage(t *testing.T) {
	f := setup(t, 0)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	p := sendParams("q", 0, "a", "b", "c", "a", "d", "e")
	p.Now = &now
	p.Keyed[0], p.Keyed[3] = true, true // the fourth repeats the first
	p.DelaySeconds[1], p.DelaySeconds[4] = 30, 60
	p.ExpirationSeconds[2] = 120
	rows, err := f.q.MessageInsert(ctx, p)
	if err != nil || len(rows) != 6 {
		t.Fatalf("send: %v, %d rows %+v", err, len(rows), rows)
	}
	byPos := map[int32]db.MessageInsertRow{}
	for _, r := range rows {
		byPos[r.Pos] = r
	}
	var last int64
	for pos := int32(1); pos <= 6; pos++ {
		r, ok := byPos[pos]
		if !ok {
			t.Fatalf("no row for position %d: %+v", pos, rows)
		}
		if pos == 4 {
			if r.Outcome != db.OutcomeDuplicate || r.MessageID != "a" || *r.Sequence != *byPos[1].Sequence {
				t.Fatalf("position 4 repeats position 1's key: %+v, the first %+v", r, byPos[1])
			}
			continue
		}
		if r.Outcome != db.OutcomeSent || r.MessageID != p.MessageIds[pos-1] {
			t.Fatalf("position %d: %+v", pos, r)
		}
		if *r.Sequence <= last {
			t.Fatalf("position %d has sequence %d, not above the previous position's %d", pos, *r.Sequence, last)
		}
		last = *r.Sequence
		delay := time.Duration(p.DelaySeconds[pos-1]) * time.Second
		if !r.SentAt.Equal(now) || (delay == 0) != (r.DelayedTo == nil) || (delay > 0 && !r.DelayedTo.Equal(now.Add(delay))) {
			t.Fatalf("position %d (delay %v): %+v", pos, delay, r)
		}
		if exp := p.ExpirationSeconds[pos-1]; (exp == 0) != (r.ExpiresAt == nil) ||
			(exp > 0 && !r.ExpiresAt.Equal(now.Add(delay+time.Duration(exp)*time.Second))) {
			t.Fatalf("position %d (expiration %d s): %+v", pos, exp, r)
		}

		// The stored message is the one the row answers for.
		var id string
		var sentAt, visibleAt time.Time
		var delayedTo, expiresAt *time.Time
		var ready, timers int
		err := f.pool.QueryRow(ctx, `
SELECT m.message_id, m.sent_at, m.visible_at, m.delayed_to, m.expires_at,
       (SELECT count(*) FROM skipq.ready r WHERE r.queue_id = m.queue_id AND r.sequence = m.sequence),
       (SELECT count(*) FROM skipq.timers t
        WHERE t.queue_id = m.queue_id AND t.sequence = m.sequence AND t.due_at = m.visible_at)
FROM skipq.messages m WHERE m.queue_id = $1 AND m.sequence = $2`, r.QueueID, *r.Sequence).
			Scan(&id, &sentAt, &visibleAt, &delayedTo, &expiresAt, &ready, &timers)
		if err != nil {
			t.Fatalf("position %d: %v", pos, err)
		}
		if id != r.MessageID || !sentAt.Equal(now) || !visibleAt.Equal(now.Add(delay)) ||
			!equalTimes(delayedTo, r.DelayedTo) || !equalTimes(expiresAt, r.ExpiresAt) {
			t.Fatalf("position %d answered %+v, stored %s sent %v visible %v delayed %v expires %v",
				pos, r, id, sentAt, visibleAt, delayedTo, expiresAt)
		}
		if wantReady := delay == 0; (ready == 1) != wantReady || (timers == 1) == wantReady {
			t.Fatalf("position %d (delay %v): %d ready rows, %d timers", pos, delay, ready, timers)
		}
	}
}

// A standard queue refuses a group on any message of a send, and takes a
// send whose group array names none.
func TestMessageInsertStandardQueueRefusesGroups(t *testing.T) {
	f := setup(t, 0)
	ctx := context.Background()
	p := sendParams("q", 0, "a", "b", "c")
	p.GroupIds = make([]*string, 3)
	rows, err := f.q.MessageInsert(ctx, p)
	if err != nil || len(rows) != 3 || rows[0].Outcome != db.OutcomeSent {
		t.Fatalf("a send without groups: %v %+v", err, rows)
	}
	g := "g"
	p = sendParams("q", 0, "d", "e", "f")
	p.GroupIds = []*string{nil, &g, nil}
	rows, err = f.q.MessageInsert(ctx, p)
	if err != nil || len(rows) != 1 || rows[0].Pos != 2 || rows[0].Outcome != db.OutcomeGroupRefused {
		t.Fatalf("a send with a group on a standard queue: %v %+v", err, rows)
	}
	var stored int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM skipq.messages`).Scan(&stored); err != nil || stored != 3 {
		t.Fatalf("%d messages stored (%v), want the first send's 3", stored, err)
	}
}

func equalTimes(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
