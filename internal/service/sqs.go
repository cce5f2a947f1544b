package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/skipq/skipq/internal/db"
)

// The SQS endpoint (package sqs) speaks SQS on top of these. Its message
// attributes ride in the message's tags under SQSTagKey, a key native
// senders cannot use (tag keys must not start with "skipq."), so every
// move that copies tags (dead-letter, requeue, redrive) carries them, and
// no statement of the native hot path changes.

// SQSTagKey is the reserved tag that holds a message's SQSData as JSON.
const SQSTagKey = "skipq.sqs"

// SQSAttribute is one typed SQS message attribute.
type SQSAttribute struct {
	DataType    string  `json:"DataType"`
	StringValue *string `json:"StringValue,omitempty"`
	BinaryValue []byte  `json:"BinaryValue,omitempty"`
}

// SQSData is what a message carries for SQS beyond the native fields.
type SQSData struct {
	Attributes  map[string]SQSAttribute `json:"a,omitempty"`
	TraceHeader string                  `json:"t,omitempty"`
	// GroupID is a MessageGroupId as given: on a standard queue it has no
	// effect; on a FIFO queue it is kept only when the native group had to
	// be another name (SQS allows characters native groups do not).
	GroupID string `json:"g,omitempty"`
	// DedupID is a FIFO message's MessageDeduplicationId (given, or the
	// body's SHA-256 under content-based deduplication).
	DedupID string `json:"d,omitempty"`
}

// parseSQSData reads the reserved tag; anything but a document this
// service wrote (a SQL sender may put any string there) reads as none.
func parseSQSData(v string) *SQSData {
	if v == "" {
		return nil
	}
	var d SQSData
	if json.Unmarshal([]byte(v), &d) != nil {
		return nil
	}
	return &d
}

// SQSQueue is a queue with what the SQS endpoint stores beside it.
type SQSQueue struct {
	Queue
	ID int64
	// Attributes are SQS attributes kept verbatim (Policy, KMS, ...).
	Attributes map[string]string
	Tags       map[string]string
	// MaxMessageBytes is MaximumMessageSize (0: SQS's default).
	MaxMessageBytes int
	// UpdatedAt is when SQS last changed the queue (its creation if never).
	UpdatedAt time.Time
}

// SQSSend sends one message as Send does, to a queue that must exist: an
// SQS send never creates a queue. A queue this node still has in its cache
// but another node deleted answers KindNotFound (QueueDoesNotExist) instead
// of coming back with the native defaults.
func (s *Service) SQSSend(ctx context.Context, tenant, queue string, in MessageInput) (SendResult, error) {
	return s.sendOne(ctx, tenant, queue, in, refuseMissing)
}

// SQSSendBatch sends messages as SendBatch does, to a queue that must
// exist (SQSSend).
func (s *Service) SQSSendBatch(ctx context.Context, tenant, queue string, in []MessageInput) ([]SendResult, error) {
	return s.sendBatch(ctx, tenant, queue, in, refuseMissing)
}

// SQSQueue returns a queue with its SQS extras (KindNotFound if missing).
func (s *Service) SQSQueue(ctx context.Context, tenant, name string) (SQSQueue, error) {
	if err := checkQueueName("queue", name); err != nil {
		return SQSQueue{}, notFound("queue %q does not exist", name)
	}
	row, err := s.q.SQSQueueGet(ctx, db.SQSQueueGetParams{Tenant: tenant, Name: name})
	if err != nil {
		if errors.Is(db.NotFound(err), db.ErrNotFound) {
			return SQSQueue{}, notFound("queue %q does not exist", name)
		}
		return SQSQueue{}, fromDB("get queue", err)
	}
	q := SQSQueue{
		Queue: queueFromRow(db.SkipqQueue{ID: row.ID, Tenant: row.Tenant, Name: row.Name,
			VisibilitySeconds: row.VisibilitySeconds, ReceiveWaitSeconds: row.ReceiveWaitSeconds,
			DelaySeconds: row.DelaySeconds, ExpirationSeconds: row.ExpirationSeconds,
			MaxReceiveCount: row.MaxReceiveCount, DeadLetterQueue: row.DeadLetterQueue,
			DedupWindowSeconds: row.DedupWindowSeconds, CreatedAt: row.CreatedAt,
			Fifo: row.Fifo, ContentBasedDedup: row.ContentBasedDedup}),
		ID: row.ID, Attributes: map[string]string{}, Tags: map[string]string{}, UpdatedAt: row.CreatedAt,
	}
	// Written by SQSPutQueue from maps of strings.
	_ = json.Unmarshal(row.SqsAttributes, &q.Attributes)
	_ = json.Unmarshal(row.SqsTags, &q.Tags)
	if row.SqsMaxMessageBytes != nil {
		q.MaxMessageBytes = int(*row.SqsMaxMessageBytes)
	}
	if row.SqsUpdatedAt != nil {
		q.UpdatedAt = *row.SqsUpdatedAt
	}
	return q, nil
}

// SQSExtras are the SQS-only settings of a queue; nil fields keep their
// current values.
type SQSExtras struct {
	Attributes      map[string]string
	Tags            map[string]string
	MaxMessageBytes *int
}

// SQSPutQueue writes a queue's SQS extras.
func (s *Service) SQSPutQueue(ctx context.Context, queueID int64, x SQSExtras) error {
	p := db.SQSQueuePutParams{QueueID: queueID, MaxMessageBytes: int32Ptr(x.MaxMessageBytes)}
	if x.Attributes != nil {
		p.Attributes, _ = json.Marshal(x.Attributes)
	}
	if x.Tags != nil {
		p.Tags, _ = json.Marshal(x.Tags)
	}
	err := s.q.SQSQueuePut(ctx, p)
	if db.IsForeignKeyViolation(err) {
		return notFound("the queue was deleted")
	}
	return fromDB("put queue", err)
}

// SQSDeadLetterSources lists the queues of a tenant whose dead-letter queue
// is name, by name after `after`; more reports that more remain.
func (s *Service) SQSDeadLetterSources(ctx context.Context, tenant, name, after string, limit int) (names []string, more bool, err error) {
	if err := checkTextKey("NextToken", after); err != nil {
		return nil, false, err
	}
	names, err = s.q.SQSDeadLetterSources(ctx, db.SQSDeadLetterSourcesParams{
		Tenant: tenant, Name: name, After: after, MaxQueues: int32(limit + 1)})
	if err != nil {
		return nil, false, fromDB("list dead-letter sources", err)
	}
	if len(names) > limit {
		return names[:limit], true, nil
	}
	return names, false, nil
}

// ReceiptQueueID is the queue id a well-formed receipt handle names.
func ReceiptQueueID(handle string) (int64, bool) {
	r, ok := parseReceipt(handle)
	return r.queueID, ok
}

// QueueRow is a queue's row (KindNotFound if missing), for the SQS move
// tasks that redrive it step by step (RedriveStep).
func (s *Service) QueueRow(ctx context.Context, tenant, name string) (db.SkipqQueue, error) {
	return s.queueByName(ctx, tenant, name)
}

// RedriveStep moves up to max dead-lettered messages of q to toQueue ("":
// back where each came from) in one transaction, wakes their receivers,
// and says how many it moved: one step of an SQS message move task. Its
// error is the database's, for the caller to classify (FromDB).
func (s *Service) RedriveStep(ctx context.Context, q db.SkipqQueue, toQueue string, max int) (int, error) {
	rows, err := s.redriveSome(ctx, q, toQueue, max)
	return len(rows), err
}

// Lease is a claim of a message as its receipt handle names it.
type Lease struct {
	Sequence int64
	Token    []byte
}

// LeaseOf is the lease a well-formed receipt handle names.
func LeaseOf(handle string) (Lease, bool) {
	r, ok := parseReceipt(handle)
	return Lease{Sequence: r.sequence, Token: r.token}, ok
}

// StillLeased returns the messages of a queue under leases, with their
// receipt handles, when every one of them is still in flight under its
// lease (a retried FIFO receive answers them again); else ok is false.
func (s *Service) StillLeased(ctx context.Context, queueID int64, queue string, leases []Lease) (msgs []Message, ok bool, err error) {
	seqs := make([]int64, len(leases))
	for i, l := range leases {
		seqs[i] = l.Sequence
	}
	rows, err := s.q.SQSMessagesInFlight(ctx, db.SQSMessagesInFlightParams{QueueID: queueID, Sequences: seqs})
	if err != nil {
		return nil, false, fromDB("receive", err)
	}
	if err := s.fillTopicBodies(ctx, pointers(rows)...); err != nil {
		return nil, false, err
	}
	bySeq := make(map[int64]db.SkipqMessage, len(rows))
	for _, r := range rows {
		bySeq[r.Sequence] = r
	}
	for _, l := range leases {
		r, found := bySeq[l.Sequence]
		if !found || !bytes.Equal(r.LeaseToken, l.Token) {
			return nil, false, nil
		}
		m := messageFromRow(queue, r)
		m.ReceiptHandle = encodeReceipt(r.QueueID, r.Sequence, r.LeaseToken)
		m.VisibleUntil = new(r.VisibleAt)
		msgs = append(msgs, m)
	}
	return msgs, true, nil
}
