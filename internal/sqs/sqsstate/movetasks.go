package sqsstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/service"
)

// MoveTask is an SQS message move task (StartMessageMoveTask): the
// native bulk redrive of a dead-letter queue, run in the background.
type MoveTask struct {
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

func moveTaskFromRow(r db.SkipqSqsMoveTask) MoveTask {
	t := MoveTask{ID: r.ID, Destination: r.Destination, Status: r.Status, Moved: r.Moved, ToMove: r.ToMove,
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

// StartMoveTask starts moving the dead-lettered messages of source (a
// queue that is some queue's dead-letter queue) to destination ("": back
// where each came from), at most maxPerSecond a second when given. The
// task runs on this node until it is done, cancelled, fails, or the node
// stops (then another node's worker takes it over).
func (st *State) StartMoveTask(ctx context.Context, tenant, source, destination string, maxPerSecond *int) (MoveTask, error) {
	q, err := st.svc.QueueRow(ctx, tenant, source)
	if err != nil {
		return MoveTask{}, err
	}
	sources, _, err := st.svc.SQSDeadLetterSources(ctx, tenant, source, "", 1)
	if err != nil {
		return MoveTask{}, err
	}
	if len(sources) == 0 {
		return MoveTask{}, service.Invalid(service.Issue{Path: "SourceArn", Message: "is not a dead-letter queue of any queue"})
	}
	toMove, err := st.q.MessageDeadLetteredCount(ctx, q.ID)
	if err != nil {
		return MoveTask{}, service.FromDB("start move task", err)
	}
	var perSecond *int32
	if maxPerSecond != nil {
		perSecond = new(int32(*maxPerSecond))
	}
	runner := uuid.New()
	row, err := st.q.SQSMoveTaskStart(ctx, db.SQSMoveTaskStartParams{SourceQueueID: q.ID, Destination: destination,
		MaxPerSecond: perSecond, ToMove: toMove, Runner: pgtype.UUID{Bytes: runner, Valid: true}})
	if db.IsUniqueViolation(err, "sqs_move_tasks_active_idx") {
		return MoveTask{}, service.Invalid(service.Issue{Path: "SourceArn", Message: "has a message move task running already"})
	}
	if err != nil {
		return MoveTask{}, service.FromDB("start move task", err)
	}
	t := moveTaskFromRow(row)
	go st.runMoveTask(q, t, runner)
	return t, nil
}

// ListMoveTasks lists the most recent move tasks of a queue. It only
// reads (a read key may list): tasks whose node stopped are taken over by
// the worker (TakeOverMoveTasks).
func (st *State) ListMoveTasks(ctx context.Context, tenant, source string, limit int) ([]MoveTask, error) {
	q, err := st.svc.QueueRow(ctx, tenant, source)
	if err != nil {
		return nil, err
	}
	rows, err := st.q.SQSMoveTaskList(ctx, db.SQSMoveTaskListParams{SourceQueueID: q.ID, MaxTasks: int32(limit)})
	if err != nil {
		return nil, service.FromDB("list move tasks", err)
	}
	out := make([]MoveTask, len(rows))
	for i, r := range rows {
		out[i] = moveTaskFromRow(r)
	}
	return out, nil
}

// TakeOverMoveTasks is the worker's: it takes over up to max move tasks
// whose node stopped running them (no heartbeat for moveStaleSeconds) and
// resumes them on this node; a cancelled one just ends. It returns how
// many it took.
func (st *State) TakeOverMoveTasks(ctx context.Context, max int) (int, error) {
	runner := uuid.New()
	rows, err := st.q.SQSMoveTaskTakeOverStale(ctx, db.SQSMoveTaskTakeOverStaleParams{
		Runner: pgtype.UUID{Bytes: runner, Valid: true}, StaleSeconds: moveStaleSeconds, MaxTasks: int32(max)})
	if err != nil {
		return 0, service.FromDB("take over move tasks", err)
	}
	for _, r := range rows {
		if r.Status != "RUNNING" {
			continue
		}
		q, err := st.queueByID(ctx, r.SourceQueueID)
		if err != nil {
			// Its queue is gone (its tasks go with it) or unreadable now:
			// the task's heartbeat goes stale again and a later run
			// retries.
			st.log.Warn("SQS move task: taking over failed", "task", r.ID, "err", err)
			continue
		}
		go st.runMoveTask(q, moveTaskFromRow(r), runner)
	}
	return len(rows), nil
}

// queueByID is the queue with id, as the worker finds it from a task's
// row.
func (st *State) queueByID(ctx context.Context, id int64) (db.SkipqQueue, error) {
	names, err := st.q.QueueTenantsByID(ctx, []int64{id})
	if err != nil {
		return db.SkipqQueue{}, service.FromDB("find queue", err)
	}
	if len(names) == 0 {
		return db.SkipqQueue{}, &service.Error{Kind: service.KindNotFound, Message: fmt.Sprintf("no queue %d", id)}
	}
	return st.svc.QueueRow(ctx, names[0].Tenant, names[0].Name)
}

// CancelMoveTask asks a running task of the tenant to stop; it stops
// after the step it is in. KindNotFound: no such task; KindInvalid: it is
// not running.
func (st *State) CancelMoveTask(ctx context.Context, tenant string, id int64) (MoveTask, error) {
	row, err := st.q.SQSMoveTaskCancel(ctx, db.SQSMoveTaskCancelParams{ID: id, Tenant: tenant})
	if err == nil {
		return moveTaskFromRow(row), nil
	}
	if !errors.Is(db.NotFound(err), db.ErrNotFound) {
		return MoveTask{}, service.FromDB("cancel move task", err)
	}
	if _, err := st.q.SQSMoveTaskGet(ctx, db.SQSMoveTaskGetParams{ID: id, Tenant: tenant}); err != nil {
		if errors.Is(db.NotFound(err), db.ErrNotFound) {
			return MoveTask{}, &service.Error{Kind: service.KindNotFound, Message: fmt.Sprintf("no message move task %d", id)}
		}
		return MoveTask{}, service.FromDB("cancel move task", err)
	}
	return MoveTask{}, service.Invalid(service.Issue{Path: "TaskHandle", Message: "the task is not running"})
}

// runMoveTask runs a move task, one redrive transaction per step, until it
// is done, cancelled, failed, taken over by another node, or this node
// stops. Each step first records the last one's progress, which is where a
// cancel is seen.
func (st *State) runMoveTask(q db.SkipqQueue, t MoveTask, runner uuid.UUID) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-st.svc.Hub().Closing():
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
		status, err := st.q.SQSMoveTaskProgress(ctx, db.SQSMoveTaskProgressParams{ID: t.ID,
			Runner: pgtype.UUID{Bytes: runner, Valid: true}, Moved: moved, Done: done, Failure: failure})
		if err != nil || status != "RUNNING" {
			if err != nil && ctx.Err() == nil && !errors.Is(db.NotFound(err), db.ErrNotFound) {
				st.log.Warn("SQS move task: recording progress failed; another node takes it over", "task", t.ID, "err", err)
			}
			return
		}
		began := time.Now()
		n, err := st.svc.RedriveStep(ctx, q, t.Destination, step)
		moved, done = int64(n), err == nil && n < step
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			reason := service.FromDB("move messages", err).Error()
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
