package sqsstate

import (
	"context"
	"errors"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/service"
)

// ReceiveAgain answers a retried FIFO receive (ReceiveRequestAttemptId):
// the messages the attempt handed out, with the same handles, when it was
// made in the last five minutes and all of them are still in flight under
// those leases; else ok is false and the caller receives afresh.
func (st *State) ReceiveAgain(ctx context.Context, queueID int64, queue, attemptID string) (msgs []service.Message, ok bool, err error) {
	a, err := st.q.SQSReceiveAttemptGet(ctx, db.SQSReceiveAttemptGetParams{QueueID: queueID, AttemptID: attemptID})
	if errors.Is(db.NotFound(err), db.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, service.FromDB("receive", err)
	}
	leases := make([]service.Lease, len(a.Sequences))
	for i, seq := range a.Sequences {
		leases[i] = service.Lease{Sequence: seq, Token: a.Tokens[i]}
	}
	return st.svc.StillLeased(ctx, queueID, queue, leases)
}

// RecordReceive records what a FIFO receive that named an attempt id
// handed out, for ReceiveAgain. A failure is logged, not returned: the
// messages are claimed and must be answered; a retry of the attempt then
// receives afresh.
func (st *State) RecordReceive(ctx context.Context, queueID int64, attemptID string, msgs []service.Message) {
	p := db.SQSReceiveAttemptPutParams{QueueID: queueID, AttemptID: attemptID}
	for _, m := range msgs {
		l, _ := service.LeaseOf(m.ReceiptHandle)
		p.Sequences, p.Tokens = append(p.Sequences, l.Sequence), append(p.Tokens, l.Token)
	}
	if err := st.q.SQSReceiveAttemptPut(ctx, p); err != nil {
		st.log.Warn("SQS receive: recording the attempt failed", "err", err)
	}
}
