package service

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/testdb"
)

// newTopicGroups is a service on a fresh database with the topic "tp" of
// the tenant "default", and a subscription of it for each of groups.
func newTopicGroups(t *testing.T, groups ...string) *Service {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := New(pool, Options{Limits: DefaultLimits()})
	if _, _, err := s.PutTopic(ctx, "default", "tp", TopicSettings{}); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if _, err := s.Subscribe(ctx, "default", "tp", g, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// A shared claim of several queues is one statement: every call gets a
// message of its own queue (as many as the queue has), a topic copy with
// its body in place, and a call on a queue that does not exist gets none.
func TestSharedClaimOfSeveralQueues(t *testing.T) {
	ctx := context.Background()
	groups := []string{"g1", "g2", "g3"}
	s := newTopicGroups(t, groups...)
	if _, err := s.Publish(ctx, "default", "tp", []MessageInput{{Body: "published"}}, func(int) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SendBatch(ctx, "default", "plain", []MessageInput{{Body: "a"}, {Body: "b"}}); err != nil {
		t.Fatal(err)
	}
	var calls []*claimCall
	for _, q := range append(groups, "plain", "plain", "plain", "missing") {
		calls = append(calls, &claimCall{tenant: "default", queue: q})
	}
	if blocked := s.runClaims(ctx, s.shared, calls); len(blocked) > 0 {
		t.Fatalf("%d calls blocked", len(blocked))
	}
	plainBodies := map[string]int{}
	for i, c := range calls {
		if c.err != nil {
			t.Fatalf("call %d (%s): %v", i, c.queue, c.err)
		}
		switch {
		case c.queue == "plain" || c.queue == "missing":
			if len(c.rows) == 1 {
				plainBodies[string(c.rows[0].Body)]++
			}
		case len(c.rows) != 1:
			t.Errorf("group %s: %d messages, want 1", c.queue, len(c.rows))
		default:
			m := messageFromRow(c.queue, c.rows[0])
			if _, named := topicBodyID(c.rows[0].Tags); named || string(m.Body) != "published" ||
				m.Tags[TopicTagKey] != "tp" || len(c.rows[0].LeaseToken) == 0 {
				t.Errorf("group %s: body %q, tags %s, lease %x: want the published body in place, leased",
					c.queue, m.Body, c.rows[0].Tags, c.rows[0].LeaseToken)
			}
		}
	}
	if plainBodies["a"] != 1 || plainBodies["b"] != 1 || len(plainBodies) != 2 {
		t.Errorf("plain queue's calls got %v, want a and b once each", plainBodies)
	}
	if len(calls[len(calls)-1].rows) != 0 {
		t.Errorf("the missing queue's call got %d messages", len(calls[len(calls)-1].rows))
	}
}
