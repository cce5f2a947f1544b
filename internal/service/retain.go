package service

import (
	"encoding/json"
	"time"
)

// Retention of acked messages (docs/API.md#model): on a queue with
// RetainAckedSeconds an ack keeps the message in state acked
// (skipq.message_retain, internal/migrations/current/functions/message_retain.sql). The row's
// columns keep it off every delivery path; what is shown of the ack rides
// in its tags under ackedTagKey, reserved like SQSTagKey.

// ackedTagKey is the reserved tag of a retained message: an ackedData
// document.
const ackedTagKey = "skipq.acked"

// ackedData is what a retained message keeps of its ack.
type ackedData struct {
	At time.Time `json:"at"`
	// Group is the FIFO group it left (its group_id is cleared, so that
	// it neither holds nor counts in the group); nil on a standard queue.
	Group *string `json:"g"`
}

// parseAcked reads the reserved tag; anything but a document this service
// wrote reads as none.
func parseAcked(v string) *ackedData {
	if v == "" {
		return nil
	}
	var d ackedData
	if json.Unmarshal([]byte(v), &d) != nil || d.At.IsZero() {
		return nil
	}
	return &d
}
