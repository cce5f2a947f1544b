package client_test

import (
	"net/http"
	"testing"

	"github.com/skipq/skipq/client"
)

func TestTopics(t *testing.T) {
	c := newClient(t, startNode(t))
	ctx := ctxFor(t)
	if _, created, err := c.PutTopic(ctx, "orders", client.TopicSettings{}); err != nil || !created {
		t.Fatalf("PutTopic: %v %v", created, err)
	}
	if _, created, err := c.Subscribe(ctx, "orders", "billing", nil); err != nil || !created {
		t.Fatalf("Subscribe: %v %v", created, err)
	}
	tp, _, err := c.Subscribe(ctx, "orders", "eu", &client.TopicFilter{Tags: map[string][]string{"region": {"eu"}}})
	if err != nil || len(tp.Subscriptions) != 2 || tp.Subscriptions[1].Filter == nil {
		t.Fatalf("Subscribe with a filter: %+v %v", tp, err)
	}
	res := must[client.PublishResult](t)(c.Publish(ctx, "orders", client.Message{Body: []byte("one"), MessageID: "o1",
		Tags: map[string]string{"region": "us"}}))
	if res.DeliveredTo != 1 || res.Duplicate {
		t.Fatalf("Publish: %+v", res)
	}
	batch, err := c.PublishBatch(ctx, "orders", []client.Message{text("two"), {Body: []byte("three"),
		Tags: map[string]string{"region": "eu"}}})
	if err != nil || len(batch) != 2 || batch[0].DeliveredTo != 1 || batch[1].DeliveredTo != 2 {
		t.Fatalf("PublishBatch: %+v %v", batch, err)
	}
	if got := receive(t, c, "billing", 10); len(got) != 3 {
		t.Fatalf("billing received %d messages, want 3", len(got))
	}
	groups := must[[]client.GroupState](t)(c.TopicMessage(ctx, "orders", "o1"))
	if len(groups) != 2 || groups[0].Queue != "billing" || groups[0].State != "in_flight" || groups[1].State != "gone" {
		t.Fatalf("TopicMessage: %+v", groups)
	}
	var names []string
	for s, err := range c.Topics(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, s.Name)
	}
	if len(names) != 1 || names[0] != "orders" {
		t.Fatalf("Topics: %v", names)
	}
	if err := c.Unsubscribe(ctx, "orders", "eu"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Publish(ctx, "orders", text("late"))
	wantCode(t, err, http.StatusNotFound, "not_found")
}
