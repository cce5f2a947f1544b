package service

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"time"

	"github.com/skipq/skipq/db"
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

// SQSCredentials returns the access key id of a live key, giving it newID()
// on first use.
func (s *Service) SQSCredentials(ctx context.Context, keyID int64, newID func() string) (string, error) {
	keys, err := s.ListKeys(ctx)
	if err != nil {
		return "", err
	}
	for _, k := range keys {
		if k.ID != keyID {
			continue
		}
		if k.RevokedAt != nil {
			return "", &Error{Kind: KindInvalid, Message: "the key is revoked"}
		}
		id, err := s.q.SQSCredentialsCreate(ctx, db.SQSCredentialsCreateParams{AccessKeyID: newID(), KeyID: keyID})
		return id, fromDB("create SQS credentials", err)
	}
	return "", notFound("no key with id %d", keyID)
}

// SQSAccessKeyIDs maps key ids to their access key ids.
func (s *Service) SQSAccessKeyIDs(ctx context.Context) (map[int64]string, error) {
	rows, err := s.q.SQSCredentialsList(ctx)
	if err != nil {
		return nil, fromDB("list SQS credentials", err)
	}
	out := make(map[int64]string, len(rows))
	for _, r := range rows {
		out[r.KeyID] = r.AccessKeyID
	}
	return out, nil
}

// AuthenticateSQS returns the live key an access key id belongs to, or
// ErrUnauthenticated. Answers are cached like secrets' (keyCache: valid ids
// and rejected ones apart, for KeyCacheTTL).
func (s *Service) AuthenticateSQS(ctx context.Context, accessKeyID string) (APIKey, error) {
	if len(accessKeyID) > 128 {
		return APIKey{}, ErrUnauthenticated
	}
	c := &s.sqsKeys
	hash := sha256.Sum256([]byte(accessKeyID))
	if key, err := c.cached(hash, time.Now()); !errors.Is(err, errNotCached) {
		return key, err
	}
	row, err := s.q.SQSCredentialsAuthenticate(ctx, accessKeyID)
	return c.remember(hash, row, err)
}

// ReceiptQueueID is the queue id a well-formed receipt handle names.
func ReceiptQueueID(handle string) (int64, bool) {
	r, ok := parseReceipt(handle)
	return r.queueID, ok
}
