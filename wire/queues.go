package wire

// QueueSettings is the body of PUT /v1/queues/{queue}. A nil field is not
// sent: on create it takes the server default (in parentheses), on update
// it keeps the queue's current value.
type QueueSettings struct {
	VisibilitySeconds  *int    `json:"visibilitySeconds,omitempty"`  // lease of a receive (60)
	ReceiveWaitSeconds *int    `json:"receiveWaitSeconds,omitempty"` // long-poll wait of a receive (1)
	DelaySeconds       *int    `json:"delaySeconds,omitempty"`       // delay of a send (0)
	ExpirationSeconds  *int    `json:"expirationSeconds,omitempty"`  // 0 = never expires (0)
	MaxReceiveCount    *int    `json:"maxReceiveCount,omitempty"`    // 0 = the server's limit (0)
	DeadLetterQueue    *string `json:"deadLetterQueue,omitempty"`    // "" = discard over-limit messages ("")
	DedupWindowSeconds *int    `json:"dedupWindowSeconds,omitempty"` // how long a messageId is remembered (300)
	FIFO               *bool   `json:"fifo,omitempty"`               // message groups, fixed at creation (false)
	// ContentBasedDeduplication: a send without messageId is deduplicated
	// on its body's SHA-256 for dedupWindowSeconds (false).
	ContentBasedDeduplication *bool `json:"contentBasedDeduplication,omitempty"`
	// RetainAckedSeconds: an acked message is kept this long in state
	// acked, then removed; 0 = removed at once (0).
	RetainAckedSeconds *int `json:"retainAckedSeconds,omitempty"`
	// Trace: messages sent from now on record their history (false).
	Trace *bool `json:"trace,omitempty"`
}

// Queue is a queue with its settings; Stats only where the route says so
// (GET of one queue).
type Queue struct {
	Name               string `json:"name"`
	CreatedAt          Time   `json:"createdAt"`
	VisibilitySeconds  int    `json:"visibilitySeconds"`
	ReceiveWaitSeconds int    `json:"receiveWaitSeconds"`
	DelaySeconds       int    `json:"delaySeconds"`
	ExpirationSeconds  int    `json:"expirationSeconds"`
	MaxReceiveCount    int    `json:"maxReceiveCount"`
	DeadLetterQueue    string `json:"deadLetterQueue"`
	DedupWindowSeconds int    `json:"dedupWindowSeconds"`
	FIFO               bool   `json:"fifo"`
	// ContentBasedDeduplication: see QueueSettings.
	ContentBasedDeduplication bool        `json:"contentBasedDeduplication"`
	RetainAckedSeconds        int         `json:"retainAckedSeconds"` // see QueueSettings
	Trace                     bool        `json:"trace"`              // see QueueSettings
	Stats                     *QueueStats `json:"stats,omitempty"`
}

// QueueStats are a queue's message counts at request time. The states are
// exclusive; Total is the sum of the live ones (available, delayed,
// inFlight), Acked counts the retained messages apart.
type QueueStats struct {
	Available         int64 `json:"available"`
	Delayed           int64 `json:"delayed"`
	InFlight          int64 `json:"inFlight"`
	Total             int64 `json:"total"`
	Acked             int64 `json:"acked"`
	Groups            int64 `json:"groups"`            // FIFO groups with messages
	OldestAvailableAt *Time `json:"oldestAvailableAt"` // nil when nothing is available
}

// QueuePage is a page of GET /v1/queues.
type QueuePage struct {
	Queues     []Queue `json:"queues"`
	NextCursor *string `json:"nextCursor,omitempty"`
}

// PurgeResult answers POST /v1/queues/{queue}/purge.
type PurgeResult struct {
	Purged int64 `json:"purged"`
}
