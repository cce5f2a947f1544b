package kubemq

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"

	"github.com/skipq/skipq/internal/kubemq/kubemqpb"
	"github.com/skipq/skipq/internal/service"
)

// defaultVisibilitySeconds is KubeMQ's lease when a stream asks for 0.
const defaultVisibilitySeconds = 60

// StreamQueueMessage is KubeMQ's one-message transaction: ReceiveMessage
// claims one message with a lease; Ack, Reject (a nack), Resend (a requeue
// to another channel) and SendModifiedMessage settle it, answer and end
// the call (kubemq-js waits for that end before its next message);
// ModifyVisibility extends the lease and keeps the call open. The lease
// running out answers Error 129 and ends the call; nothing within the
// wait answers Error 138 and ends it; a client that goes away releases the
// message at once.
func (a *api) StreamQueueMessage(stream grpc.BidiStreamingServer[kubemqpb.StreamQueueMessagesRequest, kubemqpb.StreamQueueMessagesResponse]) error {
	ctx := stream.Context()
	reqs, recvErr := receiveAll(ctx, stream.Recv)
	c := &oneMessage{s: a.s, stream: stream, lease: time.NewTimer(time.Hour)}
	c.lease.Stop()
	defer c.release(context.WithoutCancel(ctx))
	for {
		select {
		case r := <-reqs:
			end, err := c.handle(ctx, r)
			if err != nil || end {
				return err
			}
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-c.lease.C:
			c.release(context.WithoutCancel(ctx))
			return stream.Send(&kubemqpb.StreamQueueMessagesResponse{RequestID: requestID(""),
				StreamRequestTypeData: kubemqpb.StreamRequestType_ReceiveMessage, IsError: true, Error: errVisibilityExpiry})
		case <-a.s.closing:
			return errShuttingDown
		case <-ctx.Done():
			return nil
		}
	}
}

// receiveAll reads a stream's requests into a channel until it ends; the
// error that ended it (io.EOF when the client closed its side) follows.
func receiveAll[T any](ctx context.Context, recv func() (*T, error)) (<-chan *T, <-chan error) {
	reqs, errs := make(chan *T), make(chan error, 1)
	go func() {
		for {
			r, err := recv()
			if err != nil {
				errs <- err
				return
			}
			select {
			case reqs <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	return reqs, errs
}

// oneMessage is a StreamQueueMessage call's state.
type oneMessage struct {
	s        *Server
	stream   grpc.BidiStreamingServer[kubemqpb.StreamQueueMessagesRequest, kubemqpb.StreamQueueMessagesResponse]
	received bool             // a ReceiveMessage came (a second one is Error 128)
	held     *service.Message // the message under lease, nil when none
	lease    *time.Timer      // fires when the held message's lease ends
}

// handle answers one request; end reports that the call is over.
func (c *oneMessage) handle(ctx context.Context, r *kubemqpb.StreamQueueMessagesRequest) (end bool, err error) {
	resp := &kubemqpb.StreamQueueMessagesResponse{RequestID: requestID(r.GetRequestID()),
		StreamRequestTypeData: r.GetStreamRequestTypeData()}
	end, err = c.act(ctx, r, resp)
	text, callErr := answer(err)
	if callErr != nil {
		return true, callErr
	}
	if text != "" {
		resp.IsError, resp.Error = true, text
	}
	if err := c.stream.Send(resp); err != nil {
		return true, err
	}
	return end, nil
}

// act carries out r and fills resp; end reports that the call is over.
func (c *oneMessage) act(ctx context.Context, r *kubemqpb.StreamQueueMessagesRequest, resp *kubemqpb.StreamQueueMessagesResponse) (end bool, err error) {
	switch r.GetStreamRequestTypeData() {
	case kubemqpb.StreamRequestType_ReceiveMessage:
		if c.received {
			return false, refuse(errAlreadyActive)
		}
		c.received = true
		m, err := c.receive(ctx, r)
		if err != nil {
			return true, err
		}
		if m == nil {
			return true, refuse(errNoNewMessage)
		}
		c.held, resp.Message = m, queueMessage(*m)
		c.lease.Reset(time.Until(*m.VisibleUntil))
		return false, nil
	case kubemqpb.StreamRequestType_AckMessage:
		if err := c.checkHeld(r, errNoMessageToAck); err != nil {
			return false, err
		}
		res, err := c.s.svc.Ack(ctx, []string{c.held.ReceiptHandle})
		return c.settled(res, err)
	case kubemqpb.StreamRequestType_RejectMessage:
		if err := c.checkHeld(r, errNoMessageReject); err != nil {
			return false, err
		}
		res, err := c.s.svc.Nack(ctx, []string{c.held.ReceiptHandle}, nil)
		return c.settled(res, err)
	case kubemqpb.StreamRequestType_ModifyVisibility:
		if c.held == nil {
			return false, refuse(errNoMessageToAck)
		}
		vis, err := c.visibility(r.GetVisibilitySeconds())
		if err != nil {
			return false, err
		}
		res, err := c.s.svc.SetVisibility(ctx, []string{c.held.ReceiptHandle}, vis)
		if err != nil || len(res.Failed) > 0 {
			return c.settled(res.SettleResult, err)
		}
		c.lease.Reset(time.Until(res.VisibleUntil[c.held.ReceiptHandle]))
		return false, nil
	case kubemqpb.StreamRequestType_ResendMessage:
		if c.held == nil {
			return false, refuse(errNoMessageToSend)
		}
		if service.ValidQueueName(r.GetChannel()) != "" {
			return false, refuse(errQueueName)
		}
		res, err := c.s.svc.Requeue(ctx, []string{c.held.ReceiptHandle}, r.GetChannel())
		if service.KindOf(err) == service.KindQueueTypeMismatch {
			return false, refuseDetail(errSendFailed, err)
		}
		return c.settled(res, err)
	case kubemqpb.StreamRequestType_SendModifiedMessage:
		if c.held == nil {
			return false, refuse(errNoMessageToSend)
		}
		if r.GetModifiedMessage() == nil {
			return false, refuse(errInvalidMessage)
		}
		sent, err := c.s.send(ctx, []*kubemqpb.QueueMessage{r.GetModifiedMessage()})
		if err != nil {
			return true, err
		}
		if sent[0].GetIsError() {
			return false, refuse(sent[0].GetError())
		}
		res, err := c.s.svc.Ack(ctx, []string{c.held.ReceiptHandle})
		return c.settled(res, err)
	default:
		return false, refuse(errStreamType)
	}
}

// receive claims the call's one message, nil when none came in the wait.
func (c *oneMessage) receive(ctx context.Context, r *kubemqpb.StreamQueueMessagesRequest) (*service.Message, error) {
	if err := checkClientAndChannel(r.GetClientID(), r.GetChannel()); err != nil {
		return nil, err
	}
	vis, err := c.visibility(r.GetVisibilitySeconds())
	if err != nil {
		return nil, err
	}
	wait, err := waitSeconds(r.GetWaitTimeSeconds(), c.s.svc.Limits())
	if err != nil {
		return nil, err
	}
	one := 1
	msgs, err := c.s.svc.Receive(ctx, identityOf(ctx).tenant, r.GetChannel(), service.ReceiveOptions{
		MaxMessages: &one, VisibilitySeconds: &vis, WaitSeconds: &wait})
	if err != nil || len(msgs) == 0 {
		return nil, err
	}
	m := &msgs[0]
	if m.VisibleUntil == nil { // a claim always says; the lease timer needs it
		until := time.Now().Add(time.Duration(vis) * time.Second)
		m.VisibleUntil = &until
	}
	return m, nil
}

// visibility is a stream's lease in seconds: 0 is KubeMQ's default.
func (c *oneMessage) visibility(v int32) (int, error) {
	if v < 0 || int(v) > c.s.svc.Limits().MaxVisibilitySeconds {
		return 0, refuse(errVisibility)
	}
	if v == 0 {
		return defaultVisibilitySeconds, nil
	}
	return int(v), nil
}

// checkHeld refuses a settle when no message is held (noneText) or when it
// names another sequence.
func (c *oneMessage) checkHeld(r *kubemqpb.StreamQueueMessagesRequest, noneText string) error {
	if c.held == nil {
		return refuse(noneText)
	}
	if r.GetRefSequence() != uint64(c.held.Sequence) {
		return refuse(errAckSequence)
	}
	return nil
}

// settled ends the call after a settle of the held message; a lease that
// ran out before the settle answers Error 129.
func (c *oneMessage) settled(res service.SettleResult, err error) (bool, error) {
	if err != nil {
		return true, err
	}
	c.held = nil
	c.lease.Stop()
	if len(res.Failed) > 0 {
		return true, refuse(errVisibilityExpiry)
	}
	return true, nil
}

// release makes a held message available again at once (a nack, as a
// lease that runs out).
func (c *oneMessage) release(ctx context.Context) {
	if c.held == nil {
		return
	}
	c.lease.Stop()
	if _, err := c.s.svc.Nack(ctx, []string{c.held.ReceiptHandle}, nil); err != nil {
		c.s.cfg.Log.Warn("kubemq: releasing a stream's message failed; its lease will end it", "err", err)
	}
	c.held = nil
}
