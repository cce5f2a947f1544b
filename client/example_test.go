package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/skipq/skipq/client"
)

// Send a message, receive it and ack it.
func Example() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080", client.WithAPIKey(os.Getenv("SKIPQ_API_KEY")))
	if err != nil {
		log.Fatal(err)
	}

	// With a MessageID the send is idempotent, so the client may retry it.
	res, err := c.Send(ctx, "orders", client.Message{
		Body:      []byte(`{"orderId": 7}`),
		Tags:      map[string]string{"type": "created"},
		MessageID: "order-7-created",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("sent", res.MessageID, "sequence", res.Sequence)

	msgs, err := c.Receive(ctx, "orders", client.ReceiveOptions{
		MaxMessages:       10,
		WaitSeconds:       new(10), // long-poll up to 10 s
		VisibilitySeconds: new(30), // then hide them for 30 s
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Printf("got %s (delivery %d): %s\n", m.MessageID, m.ReceiveCount, m.Body)
		if err := m.Ack(ctx); client.IsReceiptStale(err) {
			log.Printf("lease of %s ran out before the ack; it will come again", m.MessageID)
		} else if err != nil {
			log.Fatal(err)
		}
	}
}

// Run a consumer until Ctrl-C: four handlers at once, ack on success, nack
// on error, leases extended while a handler runs, and a clean stop.
func ExampleClient_Consume() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c, err := client.New("http://127.0.0.1:8080")
	if err != nil {
		log.Fatal(err)
	}
	err = c.Consume(ctx, "orders", func(ctx context.Context, m *client.Received) error {
		if len(m.Body) == 0 {
			return errors.New("empty order") // nacked: delivered again
		}
		fmt.Printf("processing %s: %s\n", m.MessageID, m.Body)
		return nil // acked
	}, client.ConsumeOptions{Concurrency: 4, VisibilitySeconds: 30})
	if err != nil {
		log.Fatal(err) // a request no retry fixes, e.g. a bad queue name
	}
}

// A dead-letter walk-through: messages that fail three times land in
// orders.dlq; list them, redrive one, then the rest.
func ExampleClient_Redrive() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080")
	if err != nil {
		log.Fatal(err)
	}
	_, _, err = c.PutQueue(ctx, "orders", client.QueueSettings{
		MaxReceiveCount: new(3),
		DeadLetterQueue: new("orders.dlq"),
	})
	if err != nil {
		log.Fatal(err)
	}

	// What failed, newest first, with where it came from.
	var first *client.StoredMessage
	for m, err := range c.DeadLettered(ctx, "orders") {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s in %s from %s at %s: %s\n", m.MessageID, m.Queue, m.ReRoutedFrom, m.DeadLetteredAt, m.Body)
		if first == nil {
			first = &m
		}
	}
	if first == nil {
		return
	}

	// Send one back to where it came from, as a new message.
	r, err := c.Redrive(ctx, first.Queue, first.MessageID, "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("redriven as", r.MessageID, "into", r.Queue)

	// And everything else, in rounds.
	for {
		moved, remaining, err := c.RedriveQueue(ctx, "orders.dlq", "", 0)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("moved", moved)
		if remaining == 0 {
			break
		}
	}
}
