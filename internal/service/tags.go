package service

// ReservedTagPrefix starts the tag keys skipq keeps its own per-message data
// under (SQSTagKey, the failures, the ack of a retained message, the trace
// id, a topic copy's body): a send may not use it, and message objects do
// not show them, except TopicTagKey (a topic's copies are read-only like
// every message's).
const ReservedTagPrefix = "skipq."
