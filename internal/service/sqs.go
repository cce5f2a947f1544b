package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

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

// CachedSQSKey reports whether an access key id belongs to a live key the
// node verified within KeyCacheTTL.
func (s *Service) CachedSQSKey(accessKeyID string) bool {
	_, err := s.sqsKeys.cached(sha256.Sum256([]byte(accessKeyID)), time.Now())
	return err == nil
}

// ReceiptQueueID is the queue id a well-formed receipt handle names.
func ReceiptQueueID(handle string) (int64, bool) {
	r, ok := parseReceipt(handle)
	return r.queueID, ok
}

// SQSMoveTask is an SQS message move task (StartMessageMoveTask): the
// native bulk redrive of a dead-letter queue, run in the background.
type SQSMoveTask struct {
	ID int64
	// Destination is the destination queue ("": each message back to the
	// queue it was dead-lettered from).
	Destination   string
	MaxPerSecond  *int
	Status        string // RUNNING, CANCELLING, COMPLETED, CANCELLED, FAILED
	Moved, ToMove int64
	FailureReason string
	StartedAt     time.Time
}

func moveTaskFromRow(r db.SkipqSqsMoveTask) SQSMoveTask {
	t := SQSMoveTask{ID: r.ID, Destination: r.Destination, Status: r.Status, Moved: r.Moved, ToMove: r.ToMove,
		StartedAt: r.StartedAt}
	if r.MaxPerSecond != nil {
		n := int(*r.MaxPerSecond)
		t.MaxPerSecond = &n
	}
	if r.FailureReason != nil {
		t.FailureReason = *r.FailureReason
	}
	return t
}

const (
	// moveStep is how many messages one step of a move task moves (one
	// transaction) when the task sets no rate.
	moveStep = 500
	// moveStaleSeconds: a task whose runner has not beaten for this long
	// is taken over by the next node's worker (TakeOverMoveTasks).
	moveStaleSeconds = 60
)

// SQSStartMoveTask starts moving the dead-lettered messages of source (a
// queue that is some queue's dead-letter queue) to destination ("": back
// where each came from), at most maxPerSecond a second when given. The
// task runs on this node until it is done, cancelled, fails, or the node
// stops (then another node's worker takes it over).
func (s *Service) SQSStartMoveTask(ctx context.Context, tenant, source, destination string, maxPerSecond *int) (SQSMoveTask, error) {
	q, err := s.queueByName(ctx, s.q, tenant, source)
	if err != nil {
		return SQSMoveTask{}, err
	}
	sources, _, err := s.SQSDeadLetterSources(ctx, tenant, source, "", 1)
	if err != nil {
		return SQSMoveTask{}, err
	}
	if len(sources) == 0 {
		return SQSMoveTask{}, Invalid(Issue{Path: "SourceArn", Message: "is not a dead-letter queue of any queue"})
	}
	toMove, err := s.q.MessageDeadLetteredCount(ctx, q.ID)
	if err != nil {
		return SQSMoveTask{}, fromDB("start move task", err)
	}
	runner := uuid.New()
	row, err := s.q.SQSMoveTaskStart(ctx, db.SQSMoveTaskStartParams{SourceQueueID: q.ID, Destination: destination,
		MaxPerSecond: int32Ptr(maxPerSecond), ToMove: toMove, Runner: pgtype.UUID{Bytes: runner, Valid: true}})
	if db.IsUniqueViolation(err, "sqs_move_tasks_active_idx") {
		return SQSMoveTask{}, Invalid(Issue{Path: "SourceArn", Message: "has a message move task running already"})
	}
	if err != nil {
		return SQSMoveTask{}, fromDB("start move task", err)
	}
	t := moveTaskFromRow(row)
	go s.runMoveTask(q, t, runner)
	return t, nil
}

// SQSListMoveTasks lists the most recent move tasks of a queue. It only
// reads (a read key may list): tasks whose node stopped are taken over by
// the worker (TakeOverMoveTasks).
func (s *Service) SQSListMoveTasks(ctx context.Context, tenant, source string, limit int) ([]SQSMoveTask, error) {
	q, err := s.queueByName(ctx, s.q, tenant, source)
	if err != nil {
		return nil, err
	}
	rows, err := s.q.SQSMoveTaskList(ctx, db.SQSMoveTaskListParams{SourceQueueID: q.ID, MaxTasks: int32(limit)})
	if err != nil {
		return nil, fromDB("list move tasks", err)
	}
	out := make([]SQSMoveTask, len(rows))
	for i, r := range rows {
		out[i] = moveTaskFromRow(r)
	}
	return out, nil
}

// TakeOverMoveTasks is the worker's: it takes over up to max move tasks
// whose node stopped running them (no heartbeat for moveStaleSeconds) and
// resumes them on this node; a cancelled one just ends. It returns how
// many it took.
func (s *Service) TakeOverMoveTasks(ctx context.Context, max int) (int, error) {
	runner := uuid.New()
	rows, err := s.q.SQSMoveTaskTakeOverStale(ctx, db.SQSMoveTaskTakeOverStaleParams{
		Runner: pgtype.UUID{Bytes: runner, Valid: true}, StaleSeconds: moveStaleSeconds, MaxTasks: int32(max)})
	if err != nil {
		return 0, fromDB("take over move tasks", err)
	}
	for _, r := range rows {
		if r.Status != "RUNNING" {
			continue
		}
		q, err := s.queueByID(ctx, r.SourceQueueID)
		if err != nil {
			// Its queue is gone (its tasks go with it) or unreadable now:
			// the task's heartbeat goes stale again and a later run
			// retries.
			s.log.Warn("SQS move task: taking over failed", "task", r.ID, "err", err)
			continue
		}
		go s.runMoveTask(q, moveTaskFromRow(r), runner)
	}
	return len(rows), nil
}

// queueByID is the queue with id, as the worker finds it from a row that
// names it.
func (s *Service) queueByID(ctx context.Context, id int64) (db.SkipqQueue, error) {
	names, err := s.q.QueueTenantsByID(ctx, []int64{id})
	if err != nil {
		return db.SkipqQueue{}, fromDB("find queue", err)
	}
	if len(names) == 0 {
		return db.SkipqQueue{}, notFound("no queue %d", id)
	}
	return s.queueByName(ctx, s.q, names[0].Tenant, names[0].Name)
}

// SQSCancelMoveTask asks a running task of the tenant to stop; it stops
// after the step it is in. KindNotFound: no such task; KindInvalid: it is
// not running.
func (s *Service) SQSCancelMoveTask(ctx context.Context, tenant string, id int64) (SQSMoveTask, error) {
	row, err := s.q.SQSMoveTaskCancel(ctx, db.SQSMoveTaskCancelParams{ID: id, Tenant: tenant})
	if err == nil {
		return moveTaskFromRow(row), nil
	}
	if !errors.Is(db.NotFound(err), db.ErrNotFound) {
		return SQSMoveTask{}, fromDB("cancel move task", err)
	}
	if _, err := s.q.SQSMoveTaskGet(ctx, db.SQSMoveTaskGetParams{ID: id, Tenant: tenant}); err != nil {
		if errors.Is(db.NotFound(err), db.ErrNotFound) {
			return SQSMoveTask{}, notFound("no message move task %d", id)
		}
		return SQSMoveTask{}, fromDB("cancel move task", err)
	}
	return SQSMoveTask{}, Invalid(Issue{Path: "TaskHandle", Message: "the task is not running"})
}

// runMoveTask runs a move task, one redrive transaction per step, until it
// is done, cancelled, failed, taken over by another node, or this node
// stops. Each step first records the last one's progress, which is where a
// cancel is seen.
func (s *Service) runMoveTask(q db.SkipqQueue, t SQSMoveTask, runner uuid.UUID) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.hub.Closing():
			cancel()
		case <-ctx.Done():
		}
	}()
	step := moveStep
	if t.MaxPerSecond != nil {
		step = min(step, *t.MaxPerSecond)
	}
	var moved int64
	done := false
	var failure *string
	for {
		status, err := s.q.SQSMoveTaskProgress(ctx, db.SQSMoveTaskProgressParams{ID: t.ID,
			Runner: pgtype.UUID{Bytes: runner, Valid: true}, Moved: moved, Done: done, Failure: failure})
		if err != nil || status != "RUNNING" {
			if err != nil && ctx.Err() == nil && !errors.Is(db.NotFound(err), db.ErrNotFound) {
				s.log.Warn("SQS move task: recording progress failed; another node takes it over", "task", t.ID, "err", err)
			}
			return
		}
		began := time.Now()
		rows, err := s.redriveSome(ctx, q, t.Destination, step)
		moved, done = int64(len(rows)), err == nil && len(rows) < step
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			reason := fromDB("move messages", err).Error()
			failure = &reason
		}
		if t.MaxPerSecond != nil && !done {
			select {
			case <-time.After(time.Until(began.Add(time.Second))):
			case <-ctx.Done():
				return
			}
		}
	}
}

// SQSReceiveAgain answers a retried FIFO receive (ReceiveRequestAttemptId,
// SPEC §11.16 D6): the messages the attempt handed out, with the same
// handles, when it was made in the last five minutes and all of them are
// still in flight under those leases; else ok is false and the caller
// receives afresh.
func (s *Service) SQSReceiveAgain(ctx context.Context, queueID int64, queue, attemptID string) (msgs []Message, ok bool, err error) {
	a, err := s.q.SQSReceiveAttemptGet(ctx, db.SQSReceiveAttemptGetParams{QueueID: queueID, AttemptID: attemptID})
	if errors.Is(db.NotFound(err), db.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fromDB("receive", err)
	}
	rows, err := s.q.SQSMessagesInFlight(ctx, db.SQSMessagesInFlightParams{QueueID: queueID, Sequences: a.Sequences})
	if err != nil {
		return nil, false, fromDB("receive", err)
	}
	bySeq := make(map[int64]db.SkipqMessage, len(rows))
	for _, r := range rows {
		bySeq[r.Sequence] = r
	}
	for i, seq := range a.Sequences {
		r, found := bySeq[seq]
		if !found || !bytes.Equal(r.LeaseToken, a.Tokens[i]) {
			return nil, false, nil
		}
		m := messageFromRow(queue, r)
		m.ReceiptHandle = encodeReceipt(r.QueueID, r.Sequence, r.LeaseToken)
		m.VisibleUntil = new(r.VisibleAt)
		msgs = append(msgs, m)
	}
	return msgs, true, nil
}

// SQSRecordReceive records what a FIFO receive that named an attempt id
// handed out, for SQSReceiveAgain. A failure is logged, not returned: the
// messages are claimed and must be answered; a retry of the attempt then
// receives afresh.
func (s *Service) SQSRecordReceive(ctx context.Context, queueID int64, attemptID string, msgs []Message) {
	p := db.SQSReceiveAttemptPutParams{QueueID: queueID, AttemptID: attemptID}
	for _, m := range msgs {
		r, _ := parseReceipt(m.ReceiptHandle)
		p.Sequences, p.Tokens = append(p.Sequences, r.sequence), append(p.Tokens, r.token)
	}
	if err := s.q.SQSReceiveAttemptPut(ctx, p); err != nil {
		s.log.Warn("SQS receive: recording the attempt failed", "err", err)
	}
}
