package wire

// SendRequest is one message to send (POST …/messages, and each element of
// a batch).
type SendRequest struct {
	Body              string            `json:"body,omitempty"`
	BodyEncoding      string            `json:"bodyEncoding,omitempty"` // "text" (default) or "base64"
	Metadata          string            `json:"metadata,omitempty"`
	Tags              map[string]string `json:"tags,omitempty"`
	ClientID          string            `json:"clientId,omitempty"`
	MessageID         string            `json:"messageId,omitempty"`
	DelaySeconds      *int              `json:"delaySeconds,omitempty"`
	ExpirationSeconds *int              `json:"expirationSeconds,omitempty"`
	MaxReceiveCount   *int              `json:"maxReceiveCount,omitempty"`
	DeadLetterQueue   *string           `json:"deadLetterQueue,omitempty"`
	// MaxReceiveQueue is KubeMQ's name for DeadLetterQueue.
	MaxReceiveQueue *string `json:"maxReceiveQueue,omitempty"`
	// GroupID is required on a FIFO queue and refused on a standard one.
	GroupID string `json:"groupId,omitempty"`
}

// SendBatchRequest is the body of POST …/messages/batch.
type SendBatchRequest struct {
	Messages []SendRequest `json:"messages"`
	// Atomic false stores every valid message and answers each with its
	// own result or error (SendEachResult); nil or true is all or nothing.
	Atomic *bool `json:"atomic,omitempty"`
}

// SendResult is what a send created (or, with Duplicate, what the first
// send with the same MessageID created).
type SendResult struct {
	MessageID string `json:"messageId"`
	Sequence  int64  `json:"sequence"`
	SentAt    Time   `json:"sentAt"`
	DelayedTo *Time  `json:"delayedTo"`
	ExpiresAt *Time  `json:"expiresAt"`
	Duplicate bool   `json:"duplicate"`
}

// SendBatchResult answers a batch send, in the order of its messages.
type SendBatchResult struct {
	Results []SendResult `json:"results"`
}

// SendEachResult answers a batch send with "atomic": false, one entry per
// message in order.
type SendEachResult struct {
	Results []SendEachEntry `json:"results"`
}

// SendEachEntry is one message's outcome: its SendResult, or Error when it
// was not stored.
type SendEachEntry struct {
	*SendResult
	Error *EntryError `json:"error,omitempty"`
}

// EntryError is why one message of a batch was not stored: an error
// envelope's content without a request id, issue paths relative to the
// message ("delaySeconds").
type EntryError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Issues  []Issue `json:"issues"`
}

// ReceiveRequest is the body of POST …/messages/receive; nil takes the
// queue's default.
type ReceiveRequest struct {
	MaxMessages       *int `json:"maxMessages,omitempty"`
	VisibilitySeconds *int `json:"visibilitySeconds,omitempty"`
	WaitSeconds       *int `json:"waitSeconds,omitempty"`
	IsPeek            bool `json:"isPeek,omitempty"`
	AutoAck           bool `json:"autoAck,omitempty"`
	// MaxMessagesPerGroup (FIFO queues, 1 … 10, default 1): how many of a
	// group's first messages one receive takes.
	MaxMessagesPerGroup *int `json:"maxMessagesPerGroup,omitempty"`
	// Ack (at most 1024 receipt handles) is settled first, in the same
	// transaction as the receive's first claim; the answer's Acked says
	// how each went.
	Ack []string `json:"ack,omitempty"`
}

// ReceiveResult answers a receive: the claimed messages (possibly none)
// and, when the request gave Ack, the ack's result.
type ReceiveResult struct {
	Messages []Message     `json:"messages"`
	Acked    *SettleResult `json:"acked,omitempty"`
}

// Message is a stored message: what a receive, peek, browse, lookup or
// dead-letter listing returns. State and VisibleAt are set by browsing and
// lookup only.
type Message struct {
	MessageID     string            `json:"messageId"`
	ReceiptHandle *string           `json:"receiptHandle"`
	Queue         string            `json:"queue"`
	Sequence      int64             `json:"sequence"`
	ClientID      string            `json:"clientId"`
	Metadata      string            `json:"metadata"`
	Body          string            `json:"body"`         // text, or base64 when BodyEncoding says so
	BodyEncoding  string            `json:"bodyEncoding"` // "text" or "base64"
	Tags          map[string]string `json:"tags"`
	// MessageAttributes are the typed attributes of a message sent over
	// SQS (docs/DESIGN.md#the-sqs-endpoint (D5)), read-only here; null when none.
	MessageAttributes map[string]MessageAttribute `json:"messageAttributes"`
	SentAt            Time                        `json:"sentAt"`
	FirstReceivedAt   *Time                       `json:"firstReceivedAt"`
	ReceiveCount      int                         `json:"receiveCount"`
	VisibleUntil      *Time                       `json:"visibleUntil"`
	DelayedTo         *Time                       `json:"delayedTo"`
	ExpiresAt         *Time                       `json:"expiresAt"`
	ReRoutedFrom      *string                     `json:"reRoutedFrom"`
	DeadLetteredAt    *Time                       `json:"deadLetteredAt"`
	GroupID           *string                     `json:"groupId"` // null on a standard queue
	// LastFailure is the latest failed delivery; null while none failed.
	LastFailure *Failure `json:"lastFailure"`
	// DeadLetter says why a dead letter died; null on other messages (and
	// on those dead-lettered before skipq recorded it).
	DeadLetter *DeadLetter `json:"deadLetter"`
	State      State       `json:"state,omitempty"`
	VisibleAt  *Time       `json:"visibleAt,omitempty"` // absent when acked
	// AckedAt: when a retained message (state acked) was acked.
	AckedAt *Time `json:"ackedAt,omitempty"`
}

// Failure is a failed delivery (docs/API.md#model): Cause "nack" (Reason is the
// nack's, null without one) or "lease_expired" (Reason null), when, and the
// receive count the message had reached.
type Failure struct {
	Cause        string  `json:"cause"`
	Reason       *string `json:"reason"`
	At           Time    `json:"at"`
	ReceiveCount int     `json:"receiveCount"`
}

// DeadLetter is why a message was dead-lettered: the failure of its last
// delivery in SourceQueue, the receive count it had reached there, and when
// it moved.
type DeadLetter struct {
	Cause        string  `json:"cause"`
	Reason       *string `json:"reason"`
	ReceiveCount int     `json:"receiveCount"`
	SourceQueue  string  `json:"sourceQueue"`
	At           Time    `json:"at"`
}

// Failure causes.
const (
	CauseNack         = "nack"
	CauseLeaseExpired = "lease_expired"
)

// History is a traced message's life, oldest event first (docs/API.md#history).
type History struct {
	Events []HistoryEvent `json:"events"`
}

// HistoryEvent is one event of a message's life: Type (an Event* name),
// when, the queue it happened in, and the API key that caused it (null for
// the worker's events, SQL API calls and with auth off). The other fields
// belong to some types only and are absent from the rest.
type HistoryEvent struct {
	Type  string `json:"type"`
	At    Time   `json:"at"`
	Queue string `json:"queue"`
	KeyID *int64 `json:"keyId"`
	// MessageID is the message's id in Queue; it differs from the id asked
	// for in the events before a redrive.
	MessageID    string  `json:"messageId"`
	ReceiveCount *int    `json:"receiveCount,omitempty"` // received
	VisibleUntil *Time   `json:"visibleUntil,omitempty"` // received, extended
	Reason       *string `json:"reason,omitempty"`       // nacked, dead_lettered (the last failure's)
	Cause        *string `json:"cause,omitempty"`        // dead_lettered: nack or lease_expired
	ToQueue      *string `json:"toQueue,omitempty"`      // requeued, dead_lettered, redriven
	NewMessageID *string `json:"newMessageId,omitempty"` // redriven
}

// History event types.
const (
	EventSent         = "sent"
	EventReceived     = "received"
	EventExtended     = "extended"
	EventNacked       = "nacked"
	EventLeaseExpired = "lease_expired"
	EventRequeued     = "requeued"
	EventDeadLettered = "dead_lettered"
	EventRedriven     = "redriven"
	EventAcked        = "acked"
	EventExpired      = "expired"
	EventDeleted      = "deleted"
)

// MessageAttribute is one SQS message attribute: a String or Number
// (any label) has StringValue, a Binary has BinaryValue in standard base64.
type MessageAttribute struct {
	DataType    string  `json:"dataType"`
	StringValue *string `json:"stringValue,omitempty"`
	BinaryValue []byte  `json:"binaryValue,omitempty"`
}

// State is a message's state as browsing reports it.
type State string

// Message states; "" in a filter means every state. StateDeadLettered is a
// search filter only (the messages dead-lettered into their queue and not
// received from it since, which are available or delayed there); StateAcked
// is a retained message's.
const (
	StateAvailable    State = "available"
	StateDelayed      State = "delayed"
	StateInFlight     State = "in_flight"
	StateDeadLettered State = "dead_lettered"
	StateAcked        State = "acked"
)

// Body encodings.
const (
	EncodingText   = "text"
	EncodingBase64 = "base64"
)

// MessagePage is a page of messages (receive: never a cursor).
type MessagePage struct {
	Messages   []Message `json:"messages"`
	NextCursor *string   `json:"nextCursor,omitempty"`
}
