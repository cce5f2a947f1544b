package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/worker"
)

// publishN publishes n messages "0", "1", … to topic, 50 a publish.
func publishN(t *testing.T, svc *service.Service, topic string, n int) {
	t.Helper()
	for i := 0; i < n; i += 50 {
		batch := make([]service.MessageInput, min(50, n-i))
		for j := range batch {
			batch[j] = service.MessageInput{Body: fmt.Sprint(i + j)}
		}
		if _, err := svc.Publish(context.Background(), "default", topic, batch, func(int) string { return "" }); err != nil {
			t.Fatal(err)
		}
	}
}

// A run removes at most BatchSize retained messages, only those whose
// retention ended, and none a replay has still to go through; ReplayTopics
// sends a replaying subscription its topic's retained messages in publish
// order and makes it live.
func TestPruneTopicRetentionAndReplay(t *testing.T) {
	svc, clk, pool := newService(t)
	ctx := context.Background()
	prune, replay := worker.NewPruneTopicRetention(pool, svc), worker.NewReplayTopics(pool, svc)
	prune.BatchSize, replay.BatchSize = 100, 40
	retain := 60
	for _, topic := range []string{"kept", "replayed"} {
		if _, _, err := svc.PutTopic(ctx, "default", topic, service.TopicSettings{RetainSeconds: &retain}); err != nil {
			t.Fatal(err)
		}
	}
	from := clk.now().Add(-time.Second)
	publishN(t, svc, "kept", 250)
	publishN(t, svc, "replayed", 90)
	if _, err := svc.Subscribe(ctx, "default", "replayed", "group", nil, &from); err != nil {
		t.Fatal(err)
	}
	run := func() int {
		t.Helper()
		n, err := prune.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	clk.advance(30 * time.Second)
	if n := run(); n != 0 {
		t.Fatalf("a run before the retention ended removed %d", n)
	}
	clk.advance(31 * time.Second)
	for _, want := range []int{100, 100, 50, 0} {
		if n := run(); n != want {
			t.Fatalf("a run removed %d, want %d", n, want)
		}
	}

	steps := 0
	for {
		n, err := replay.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		steps++
		if n < replay.BatchSize {
			break
		}
		if steps > 10 {
			t.Fatal("the replay does not end")
		}
	}
	if n := run(); n != 90 {
		t.Fatalf("after the replay a run removed %d, want the replayed topic's 90", n)
	}
	max, vis := 100, 30
	msgs, err := svc.Receive(ctx, "default", "group", service.ReceiveOptions{MaxMessages: &max, VisibilitySeconds: &vis, WaitSeconds: new(0)})
	if err != nil || len(msgs) != 90 {
		t.Fatalf("the replayed group got %d messages: %v", len(msgs), err)
	}
	for i, m := range msgs {
		if string(m.Body) != fmt.Sprint(i) {
			t.Fatalf("message %d of the replay is %q", i, m.Body)
		}
	}
	topic, err := svc.GetTopic(ctx, "default", "replayed")
	if err != nil || len(topic.SubscriptionList) != 1 || topic.SubscriptionList[0].ReplayFrom != nil {
		t.Fatalf("after its replay the subscription is %+v (%v)", topic.SubscriptionList, err)
	}
}
