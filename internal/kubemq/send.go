package kubemq

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/skipq/skipq/internal/kubemq/kubemqpb"
	"github.com/skipq/skipq/internal/service"
)

// SendQueueMessage sends one message through the service's send, creating
// its queue if missing.
func (a *api) SendQueueMessage(ctx context.Context, m *kubemqpb.QueueMessage) (*kubemqpb.SendQueueMessageResult, error) {
	res, err := a.s.send(ctx, []*kubemqpb.QueueMessage{m})
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// SendQueueMessagesBatch sends message by message: one refused message
// answers its own error and the others are sent.
func (a *api) SendQueueMessagesBatch(ctx context.Context, b *kubemqpb.QueueMessagesBatchRequest) (*kubemqpb.QueueMessagesBatchResponse, error) {
	if len(b.GetMessages()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "empty messages batch")
	}
	res, err := a.s.send(ctx, b.GetMessages())
	if err != nil {
		return nil, err
	}
	return &kubemqpb.QueueMessagesBatchResponse{BatchID: requestID(b.GetBatchID()), Results: res}, nil
}

// QueuesUpstream answers each request of the stream with its results,
// named by the request's id, and stays open until the client ends it or
// the node shuts down.
func (a *api) QueuesUpstream(stream grpc.BidiStreamingServer[kubemqpb.QueuesUpstreamRequest, kubemqpb.QueuesUpstreamResponse]) error {
	ctx := stream.Context()
	reqs, recvErr := receiveAll(ctx, stream.Recv)
	for {
		var req *kubemqpb.QueuesUpstreamRequest
		select {
		case req = <-reqs:
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-a.s.closing:
			return errShuttingDown
		case <-ctx.Done():
			return nil
		}
		resp := &kubemqpb.QueuesUpstreamResponse{RefRequestID: requestID(req.GetRequestID())}
		if len(req.GetMessages()) == 0 {
			resp.IsError, resp.Error = true, "no messages to send"
		} else {
			var err error
			if resp.Results, err = a.s.send(ctx, req.GetMessages()); err != nil {
				return err
			}
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// send sends msgs, each to its own channel, and answers one result per
// message in their order. Each channel's messages go as one SendEach (one
// transaction; a refused message does not stop the others). Only what
// fails the whole request (the database away) is an error.
func (s *Server) send(ctx context.Context, msgs []*kubemqpb.QueueMessage) ([]*kubemqpb.SendQueueMessageResult, error) {
	tenant := identityOf(ctx).tenant
	results := make([]*kubemqpb.SendQueueMessageResult, len(msgs))
	type pending struct {
		at []int
		in []service.MessageInput
	}
	var channels []string
	byChannel := map[string]*pending{}
	for i, m := range msgs {
		in, err := s.messageInput(m)
		if err != nil {
			text, callErr := answer(err)
			if callErr != nil {
				return nil, callErr
			}
			results[i] = failedSend(m.GetMessageID(), text)
			continue
		}
		p := byChannel[m.GetChannel()]
		if p == nil {
			p = &pending{}
			byChannel[m.GetChannel()] = p
			channels = append(channels, m.GetChannel())
		}
		p.at, p.in = append(p.at, i), append(p.in, in)
	}
	for _, ch := range channels {
		p := byChannel[ch]
		for start := 0; start < len(p.in); start += service.MaxBatchMessages {
			end := min(start+service.MaxBatchMessages, len(p.in))
			entries, err := s.sendChunk(ctx, tenant, ch, p.in[start:end])
			if err != nil {
				text, callErr := answer(sendRefusal(err))
				if callErr != nil {
					return nil, callErr
				}
				for _, i := range p.at[start:end] {
					results[i] = failedSend(msgs[i].GetMessageID(), text)
				}
				continue
			}
			for j, e := range entries {
				i := p.at[start+j]
				if e.Err != nil {
					text, callErr := answer(sendRefusal(e.Err))
					if callErr != nil {
						return nil, callErr
					}
					results[i] = failedSend(msgs[i].GetMessageID(), text)
					continue
				}
				results[i] = sendResult(e.Result)
			}
		}
	}
	return results, nil
}

// sendChunk sends up to MaxBatchMessages messages to one channel: as one
// all-or-nothing batch, the cheaper statement, and message by message only
// when the batch was refused for some of its messages (a batch that is
// refused stores nothing).
func (s *Server) sendChunk(ctx context.Context, tenant, channel string, in []service.MessageInput) ([]service.BatchEntry, error) {
	if len(in) > 1 {
		res, err := s.svc.SendBatch(ctx, tenant, channel, in)
		if err == nil {
			entries := make([]service.BatchEntry, len(res))
			for i, r := range res {
				entries[i].Result = r
			}
			return entries, nil
		}
		switch service.KindOf(err) {
		case service.KindInvalid, service.KindTooLarge, service.KindIdempotencyConflict, service.KindQueueTypeMismatch:
		default:
			return nil, err
		}
	}
	return s.svc.SendEach(ctx, tenant, channel, in, nil)
}
