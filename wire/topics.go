package wire

// TopicSettings is the body of PUT /v1/topics/{topic}; nil keeps the
// current value (the default on creation). FIFO is fixed at creation.
type TopicSettings struct {
	FIFO               *bool `json:"fifo,omitempty"`
	DedupWindowSeconds *int  `json:"dedupWindowSeconds,omitempty"`
	// RetainSeconds keeps every published message that long after its
	// publish, for subscriptions that ask for a replay (0: none).
	RetainSeconds *int `json:"retainSeconds,omitempty"`
}

// TopicSummary is one topic of a listing.
type TopicSummary struct {
	Name               string `json:"name"`
	FIFO               bool   `json:"fifo"`
	DedupWindowSeconds int    `json:"dedupWindowSeconds"`
	RetainSeconds      int    `json:"retainSeconds"`
	// Subscriptions is how many queues subscribe.
	Subscriptions int   `json:"subscriptions"`
	Published     int64 `json:"published"`
	Delivered     int64 `json:"delivered"`
	Unrouted      int64 `json:"unrouted"`
	CreatedAt     Time  `json:"createdAt"`
	UpdatedAt     Time  `json:"updatedAt"`
}

// Topic is a topic with its subscriptions (GET and PUT of a topic).
type Topic struct {
	Name               string         `json:"name"`
	FIFO               bool           `json:"fifo"`
	DedupWindowSeconds int            `json:"dedupWindowSeconds"`
	RetainSeconds      int            `json:"retainSeconds"`
	Subscriptions      []Subscription `json:"subscriptions"`
	Published          int64          `json:"published"`
	Delivered          int64          `json:"delivered"`
	Unrouted           int64          `json:"unrouted"`
	CreatedAt          Time           `json:"createdAt"`
	UpdatedAt          Time           `json:"updatedAt"`
}

// TopicPage is a page of GET /v1/topics.
type TopicPage struct {
	Topics     []TopicSummary `json:"topics"`
	NextCursor *string        `json:"nextCursor"`
}

// Subscription binds a topic to a queue, its consumer group.
type Subscription struct {
	Queue     string       `json:"queue"`
	Filter    *TopicFilter `json:"filter"`
	CreatedAt Time         `json:"createdAt"`
	// ReplayFrom is set while the subscription replays the topic's
	// retained messages published since then; publishes reach it once the
	// replay caught up.
	ReplayFrom *Time `json:"replayFrom"`
}

// TopicFilter: a message matches when, for every tag key named, its tag's
// value is one of the listed values.
type TopicFilter struct {
	Tags map[string][]string `json:"tags,omitempty"`
}

// SubscribeRequest is the body of PUT /v1/topics/{topic}/subscriptions/{queue}
// (or none: every message).
type SubscribeRequest struct {
	Filter *TopicFilter `json:"filter,omitempty"`
	// ReplayFrom, on a new subscription of a topic that retains messages:
	// its queue first receives, in publish order, every retained message
	// published since then that matches the filter. Ignored when the
	// subscription exists.
	ReplayFrom *Time `json:"replayFrom,omitempty"`
}

// PublishRequest is the body of POST /v1/topics/{topic}/messages: one
// message (a send's fields) or, with Messages, a batch.
type PublishRequest struct {
	SendRequest
	Messages []SendRequest `json:"messages,omitempty"`
	// Atomic false publishes each message of a batch on its own and
	// answers each with its result or error (PublishEachResult).
	Atomic *bool `json:"atomic,omitempty"`
}

// PublishResult is one published message: how many groups got it (a
// duplicate's: the first publish's result).
type PublishResult struct {
	MessageID   string `json:"messageId"`
	PublishedAt Time   `json:"publishedAt"`
	DeliveredTo int    `json:"deliveredTo"`
	Duplicate   bool   `json:"duplicate"`
}

// PublishBatchResult answers a batch publish, in the order of its
// messages.
type PublishBatchResult struct {
	Results []PublishResult `json:"results"`
}

// PublishEachResult answers a batch publish with "atomic": false.
type PublishEachResult struct {
	Results []PublishEachEntry `json:"results"`
}

// PublishEachEntry is one message's outcome: its PublishResult, or Error.
type PublishEachEntry struct {
	*PublishResult
	Error *EntryError `json:"error,omitempty"`
}

// TopicMessage is GET /v1/topics/{topic}/messages/{messageId}: the
// message's state in each group.
type TopicMessage struct {
	MessageID      string       `json:"messageId"`
	ConsumerGroups []GroupState `json:"consumerGroups"`
}

// GroupState is a published message's state in one group: a message
// state, "dead_lettered", or "gone" (no longer in the queue).
type GroupState struct {
	Queue          string `json:"queue"`
	State          string `json:"state"`
	ReceiveCount   int    `json:"receiveCount"`
	LeaseExpiresAt *Time  `json:"leaseExpiresAt"`
	Consumed       bool   `json:"consumed"`
}
