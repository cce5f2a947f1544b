package db_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/skipq/skipq/internal/db"
)

// One statement claims several queues, each as its own claim would: up to
// its count, in claim order, and a topic copy comes with its stored body
// in place of its empty one and without the tag that named it; a missing
// queue gives nothing.
func TestMessageClaimQueues(t *testing.T) {
	f := topicFixture(t)
	ctx := context.Background()
	subscribe(t, f.q, "g2")
	if got := publish(t, f.q, "p1", "p2"); got[0] != 2 || got[1] != 2 {
		t.Fatalf("published to %v groups, want 2 each", got)
	}
	if err := f.q.QueueCreateMissing(ctx, db.QueueCreateMissingParams{Tenant: "t", Names: []string{"plain"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.q.MessageInsert(ctx, sendParams("plain", 0, "s1")); err != nil {
		t.Fatal(err)
	}
	one := int32(1)
	rows, err := f.q.MessageClaimQueues(ctx, db.MessageClaimQueuesParams{
		Tenants:           []string{"t", "t", "t", "t"},
		Queues:            []string{"q", "missing", "plain", "g2"},
		MaxMessages:       []int32{2, 1, 5, 1},
		VisibilitySeconds: []*int32{nil, nil, &one, nil},
		KeyIDs:            []*int64{nil, nil, nil, nil},
		MaxResponseBytes:  []int64{1 << 20, 1 << 20, 1 << 20, 1 << 20},
		MessageOverheads:  []int64{700, 700, 700, 700},
	})
	if err != nil {
		t.Fatal(err)
	}
	type claimed struct {
		claim int32
		id    string
	}
	var got []claimed
	for _, r := range rows {
		got = append(got, claimed{r.Claim, r.Message.MessageID})
		m := r.Message
		var tags map[string]string
		if err := json.Unmarshal(m.Tags, &tags); err != nil {
			t.Fatal(err)
		}
		if string(m.Body) != "x" || tags["skipq.body"] != "" || len(m.LeaseToken) == 0 || m.ReceiveCount != 1 {
			t.Errorf("claim %d: body %q, tags %v, lease %x, receive count %d: want body x, no skipq.body, a lease",
				r.Claim, m.Body, tags, m.LeaseToken, m.ReceiveCount)
		}
		if copyOf := tags["skipq.topic"]; (copyOf == "tp") != (m.MessageID != "s1") {
			t.Errorf("message %s: skipq.topic %q", m.MessageID, copyOf)
		}
	}
	want := []claimed{{1, "p1"}, {1, "p2"}, {3, "s1"}, {4, "p1"}}
	if len(got) != len(want) {
		t.Fatalf("claimed %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("claimed %v, want %v", got, want)
		}
	}
}
