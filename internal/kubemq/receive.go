package kubemq

import (
	"context"

	"github.com/skipq/skipq/internal/kubemq/kubemqpb"
	"github.com/skipq/skipq/internal/service"
)

// ReceiveQueueMessages is KubeMQ's pull (IsPeak false: the messages are
// taken and deleted in one statement, at most once, as KubeMQ's pull is)
// or peek (IsPeak true: nothing changes). It answers as soon as a message
// is there, with up to MaxNumberOfMessages.
func (a *api) ReceiveQueueMessages(ctx context.Context, r *kubemqpb.ReceiveQueueMessagesRequest) (*kubemqpb.ReceiveQueueMessagesResponse, error) {
	resp := &kubemqpb.ReceiveQueueMessagesResponse{RequestID: requestID(r.GetRequestID()), IsPeak: r.GetIsPeak()}
	if !r.GetIsPeak() {
		if err := requireRole(ctx, roleWrite); err != nil {
			return nil, err
		}
	}
	msgs, err := a.s.pull(ctx, r)
	text, callErr := answer(err)
	if callErr != nil {
		return nil, callErr
	}
	if text != "" {
		resp.IsError, resp.Error = true, text
		return resp, nil
	}
	resp.Messages, resp.MessagesReceived = queueMessages(msgs), int32(len(msgs))
	return resp, nil
}

func (s *Server) pull(ctx context.Context, r *kubemqpb.ReceiveQueueMessagesRequest) ([]service.Message, error) {
	lim := s.svc.Limits()
	if err := checkClientAndChannel(r.GetClientID(), r.GetChannel()); err != nil {
		return nil, err
	}
	if n := r.GetMaxNumberOfMessages(); n < 1 || int(n) > lim.MaxReceiveMessages {
		return nil, refuse(errMaxMessages)
	}
	wait, err := waitSeconds(r.GetWaitTimeSeconds(), lim)
	if err != nil {
		return nil, err
	}
	max := int(r.GetMaxNumberOfMessages())
	return s.svc.Receive(ctx, identityOf(ctx).tenant, r.GetChannel(), service.ReceiveOptions{
		MaxMessages: &max, WaitSeconds: &wait, IsPeek: r.GetIsPeak(), AutoAck: !r.GetIsPeak()})
}

// checkClientAndChannel checks the two fields every KubeMQ queue request
// carries, with KubeMQ's codes.
func checkClientAndChannel(clientID, channel string) error {
	if clientID == "" {
		return refuse(errClientID)
	}
	if service.ValidQueueName(channel) != "" {
		return refuse(errQueueName)
	}
	return nil
}

// waitSeconds is a KubeMQ wait in seconds: 0 is 1 s, as KubeMQ's default.
func waitSeconds(w int32, lim service.Limits) (int, error) {
	if w < 0 || int(w) > lim.MaxWaitSeconds {
		return 0, refuse(errWaitTimeout)
	}
	return max(1, int(w)), nil
}

// AckAllQueueMessages removes every message of the channel that is
// available now (not delayed, not in flight), by claim-and-delete rounds
// of the largest receive, and answers at once; WaitTimeSeconds is only
// checked. It stops after as many as the queue held available when it
// began, so senders that keep up cannot keep it going.
func (a *api) AckAllQueueMessages(ctx context.Context, r *kubemqpb.AckAllQueueMessagesRequest) (*kubemqpb.AckAllQueueMessagesResponse, error) {
	resp := &kubemqpb.AckAllQueueMessagesResponse{RequestID: requestID(r.GetRequestID())}
	n, err := a.s.ackAll(ctx, r)
	text, callErr := answer(err)
	if callErr != nil {
		return nil, callErr
	}
	resp.AffectedMessages = uint64(n)
	if text != "" {
		resp.IsError, resp.Error = true, text
	}
	return resp, nil
}

func (s *Server) ackAll(ctx context.Context, r *kubemqpb.AckAllQueueMessagesRequest) (int64, error) {
	lim := s.svc.Limits()
	if err := checkClientAndChannel(r.GetClientID(), r.GetChannel()); err != nil {
		return 0, err
	}
	if _, err := waitSeconds(r.GetWaitTimeSeconds(), lim); err != nil {
		return 0, err
	}
	tenant := identityOf(ctx).tenant
	q, err := s.svc.GetQueue(ctx, tenant, r.GetChannel())
	if service.KindOf(err) == service.KindNotFound {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var done int64
	noWait, batch := 0, lim.MaxReceiveMessages
	for done < q.Stats.Available {
		msgs, err := s.svc.Receive(ctx, tenant, r.GetChannel(), service.ReceiveOptions{
			MaxMessages: &batch, WaitSeconds: &noWait, AutoAck: true})
		if err != nil {
			return done, err
		}
		if len(msgs) == 0 {
			break
		}
		done += int64(len(msgs))
	}
	return done, nil
}

// QueuesInfo reports the caller's tenant's queues (the one named by
// QueueName, else all, up to 1,000): Messages counts available, delayed
// and in-flight ones, Waiting the available ones, Bytes and the sequences
// span those messages.
func (a *api) QueuesInfo(ctx context.Context, r *kubemqpb.QueuesInfoRequest) (*kubemqpb.QueuesInfoResponse, error) {
	tenant := identityOf(ctx).tenant
	var names []string
	if r.GetQueueName() != "" {
		names = []string{r.GetQueueName()}
	} else {
		qs, _, err := a.s.svc.ListQueues(ctx, tenant, "", 1000, "")
		if err != nil {
			return nil, statusOf(err)
		}
		for _, q := range qs {
			names = append(names, q.Name)
		}
	}
	info := &kubemqpb.QueuesInfo{}
	for _, name := range names {
		q, err := a.s.svc.GetQueue(ctx, tenant, name)
		if k := service.KindOf(err); k == service.KindNotFound || k == service.KindInvalid {
			continue
		}
		if err != nil {
			return nil, statusOf(err)
		}
		span, err := a.s.svc.QueueSpan(ctx, tenant, name)
		if service.KindOf(err) == service.KindNotFound {
			continue
		}
		if err != nil {
			return nil, statusOf(err)
		}
		st := q.Stats
		qi := &kubemqpb.QueueInfo{Name: q.Name, Messages: st.Available + st.Delayed + st.InFlight, Waiting: st.Available,
			Bytes: span.Bytes, FirstSequence: span.FirstSequence, LastSequence: span.LastSequence}
		info.Queues = append(info.Queues, qi)
		info.Waiting += qi.Waiting
	}
	info.TotalQueue = int32(len(info.Queues))
	return &kubemqpb.QueuesInfoResponse{RefRequestID: requestID(r.GetRequestID()), Info: info}, nil
}
