// Package client is the Go client of skipq's HTTP API (docs/API.md): queues,
// send, receive, settle, browse, dead-letter queues and redrive, and a
// consumer loop.
//
//	c, err := client.New("http://127.0.0.1:8080", client.WithAPIKey(key))
//	res, err := c.Send(ctx, "orders", client.Message{Body: []byte(`{"id":7}`), MessageID: "order-7"})
//	msgs, err := c.Receive(ctx, "orders", client.ReceiveOptions{MaxMessages: 10, WaitSeconds: new(20)})
//	for _, m := range msgs {
//		// … work …
//		err = m.Ack(ctx)
//	}
//
// Or let Client.Consume run the loop: long-polling, bounded concurrency, ack on
// success, nack on error or panic, lease extension while a handler runs,
// and a clean stop.
//
// # Bodies
//
// Message.Body is bytes. It is sent as text when it is valid UTF-8, and as
// base64 (stored as bytes) when Message.Binary is set or it is not valid
// UTF-8. Received bodies are decoded: StoredMessage.Body is the bytes that
// were sent, and Binary tells which way they were stored.
//
// # Optional fields
//
// Optional policy fields are pointers: nil is "not sent" (the queue's
// default; on a queue update, "keep"). With Go 1.26, new(30) makes one.
//
// # Errors
//
// Every non-2xx answer is an *Error carrying the status, the code
// ("not_found", "receipt_stale", "invalid_request", …), the message, the
// request id, the issues of a 400 and Retry-After; see IsNotFound,
// IsReceiptStale and IsConflict. Transport failures are returned as they
// come (wrapped; errors.As finds the *url.Error).
//
// # Retries
//
// Requests are retried with jittered exponential backoff (WithRetry; by
// default 4 attempts, 100 ms doubling up to 5 s), and when the server sent
// Retry-After it is honoured (capped at the maximum delay). What is
// retried depends on whether repeating the request can do harm:
//
//	request                                     429   503   connection error
//	GET (queue, lists, browse, message, DLQ)    yes   yes   yes
//	PutQueue                                    yes   yes   yes
//	Ack, Nack, ExtendVisibility, Requeue (+All) yes   yes   yes
//	Send / SendBatch, every message has an id   yes   yes   yes
//	Send / SendBatch, some message has no id    yes   no    no
//	Receive, Peek                               yes   yes   no
//	DeleteQueue, PurgeQueue, DeleteMessage,
//	Redrive, RedriveQueue                       yes   no    no
//	Ready, Health                               no    no    no
//
// A 429 is answered before the server does anything, so every request may
// repeat it. A 503 or a broken connection leaves it unknown whether the
// request took effect:
//
//   - A send whose messages all carry a MessageID is an idempotent request:
//     the server answers a repeat with the first result (Duplicate set)
//     instead of creating a second message. Without MessageID a retry could
//     enqueue the message twice, so such sends are not retried: give your
//     messages ids when you want sends retried.
//   - Settle requests are idempotent in effect: the message ends in the
//     same state however often they arrive. But when the first attempt of
//     an ack, nack or requeue succeeded and only its answer was lost, the
//     retry finds the handle already used and the server answers
//     receipt_stale; the client returns that error as it is. A
//     receipt_stale after a retried settle therefore means "settled now,
//     by this call" or "could not be settled" and the client cannot tell
//     which. (ExtendVisibility has no such ambiguity: the handle stays
//     valid.)
//   - A receive is not retried after a connection error, because the
//     server may already have claimed messages for the lost answer: a
//     retry would claim more while those stay hidden until their lease
//     ends. A 503 means the server could not reach its database.
//   - PurgeQueue and RedriveQueue would act on more messages when repeated;
//     DeleteQueue, DeleteMessage and Redrive would turn a lost success into
//     not_found. They are retried on 429 only.
//
// PutQueue's created result is false when a retry found the queue that
// its own first attempt created.
//
// # Settling exactly once
//
// The settle methods of a Received message remember their outcome: after a
// successful Ack, Nack, Requeue or release (ExtendVisibility with 0) every
// further settle of that value returns ErrSettled without a request, and after a receipt_stale answer it
// returns that answer again. Consume relies on this to never settle a
// message twice, even when a handler settles it itself.
package client
