package wire

// SettleRequest is the body of an ack, and the part of every receipt
// route's body that names the handles: exactly one of ReceiptHandle (the
// single form) and ReceiptHandles (the list form).
type SettleRequest struct {
	ReceiptHandle  *string  `json:"receiptHandle,omitempty"`
	ReceiptHandles []string `json:"receiptHandles,omitempty"`
}

// NackRequest is the body of POST /v1/receipts/nack.
type NackRequest struct {
	SettleRequest
	// Reason (at most 1024 bytes) is recorded as the messages' last failure.
	Reason *string `json:"reason,omitempty"`
}

// VisibilityRequest is the body of POST /v1/receipts/visibility.
type VisibilityRequest struct {
	SettleRequest
	VisibilitySeconds *int `json:"visibilitySeconds,omitempty"` // 0 releases at once
}

// RequeueRequest is the body of POST /v1/receipts/requeue.
type RequeueRequest struct {
	SettleRequest
	Queue *string `json:"queue,omitempty"`
}

// SettleResult answers a settle: every list-form request, and a single-form
// one that succeeded.
type SettleResult struct {
	Succeeded int             `json:"succeeded"`
	Failed    []SettleFailure `json:"failed"`
}

// VisibilityResult answers a visibility change; VisibleUntil (the new end
// of the lease) only in the single form.
type VisibilityResult struct {
	SettleResult
	VisibleUntil *Time `json:"visibleUntil,omitempty"`
}

// SettleFailure is one handle that settled nothing, with the error code
// ("receipt_stale") and message.
type SettleFailure struct {
	ReceiptHandle string `json:"receiptHandle"`
	Code          string `json:"code"`
	Message       string `json:"message"`
}

// RedriveRequest is the body of POST …/messages/{id}/redrive.
type RedriveRequest struct {
	ToQueue string `json:"toQueue,omitempty"` // "" = the queue it came from
}

// RedriveResult answers a redrive of one message.
type RedriveResult struct {
	RedrivenAs Redriven `json:"redrivenAs"`
}

// Redriven names the message a redrive created.
type Redriven struct {
	Queue     string `json:"queue"`
	MessageID string `json:"messageId"`
	Sequence  int64  `json:"sequence"`
}

// RedriveQueueRequest is the body of POST /v1/queues/{queue}/redrive.
type RedriveQueueRequest struct {
	ToQueue     string `json:"toQueue,omitempty"`
	MaxMessages *int   `json:"maxMessages,omitempty"` // 1 … 10000; nil = 10000
}

// RedriveQueueResult answers a queue redrive: call again while Remaining > 0.
type RedriveQueueResult struct {
	Moved     int64 `json:"moved"`
	Remaining int64 `json:"remaining"`
}
