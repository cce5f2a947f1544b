package kubemq_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/kubemq/kubemqpb"
)

type oneStream struct {
	t *testing.T
	s interface {
		Send(*kubemqpb.StreamQueueMessagesRequest) error
		Recv() (*kubemqpb.StreamQueueMessagesResponse, error)
		CloseSend() error
	}
	cancel context.CancelFunc
}

func (e env) stream(t *testing.T) *oneStream {
	t.Helper()
	c, cancel := context.WithCancel(ctx(t))
	t.Cleanup(cancel)
	s, err := e.kq.StreamQueueMessage(c)
	if err != nil {
		t.Fatal(err)
	}
	return &oneStream{t: t, s: s, cancel: cancel}
}

func (o *oneStream) do(r *kubemqpb.StreamQueueMessagesRequest) *kubemqpb.StreamQueueMessagesResponse {
	o.t.Helper()
	if r.ClientID == "" {
		r.ClientID = clientID
	}
	if err := o.s.Send(r); err != nil {
		o.t.Fatal(err)
	}
	return o.next()
}

func (o *oneStream) next() *kubemqpb.StreamQueueMessagesResponse {
	o.t.Helper()
	resp, err := o.s.Recv()
	if err != nil {
		o.t.Fatal(err)
	}
	return resp
}

// ended fails unless the server has ended the call.
func (o *oneStream) ended() {
	o.t.Helper()
	if resp, err := o.s.Recv(); !errors.Is(err, io.EOF) {
		o.t.Fatalf("the call goes on: %v %v", resp, err)
	}
}

func receiveReq(channel string, visibility, wait int32) *kubemqpb.StreamQueueMessagesRequest {
	return &kubemqpb.StreamQueueMessagesRequest{StreamRequestTypeData: kubemqpb.StreamRequestType_ReceiveMessage,
		Channel: channel, VisibilitySeconds: visibility, WaitTimeSeconds: wait}
}

func settleReq(t kubemqpb.StreamRequestType, seq uint64) *kubemqpb.StreamQueueMessagesRequest {
	return &kubemqpb.StreamQueueMessagesRequest{StreamRequestTypeData: t, RefSequence: seq}
}

func TestStreamQueueMessage(t *testing.T) {
	e := newNode(t)

	// Nothing within the wait: Error 138, then the server ends the call.
	s := e.stream(t)
	r := s.do(receiveReq("sq", 0, 1))
	wantInBand(t, r.GetIsError(), r.GetError(), "Error 138")
	s.ended()

	// Ack: a wrong sequence is Error 125 and the call goes on; the right
	// one answers and ends the call, and the message is gone.
	e.send(t, msg("sq", "one"))
	s = e.stream(t)
	got := s.do(receiveReq("sq", 10, 1))
	seq := got.GetMessage().GetAttributes().GetSequence()
	if got.GetIsError() || string(got.GetMessage().GetBody()) != "one" || seq == 0 {
		t.Fatalf("receive: %v", got)
	}
	r = s.do(&kubemqpb.StreamQueueMessagesRequest{StreamRequestTypeData: kubemqpb.StreamRequestType_ReceiveMessage, Channel: "sq"})
	wantInBand(t, r.GetIsError(), r.GetError(), "Error 128")
	r = s.do(settleReq(kubemqpb.StreamRequestType_StreamRequestTypeUnknown, seq))
	wantInBand(t, r.GetIsError(), r.GetError(), "Error 132")
	r = s.do(settleReq(kubemqpb.StreamRequestType_AckMessage, 0))
	wantInBand(t, r.GetIsError(), r.GetError(), "Error 125")
	r = s.do(settleReq(kubemqpb.StreamRequestType_AckMessage, seq+1))
	wantInBand(t, r.GetIsError(), r.GetError(), "Error 125")
	// kubemq-js acks with the producer's ClientID: settling is not tied to it.
	ack := settleReq(kubemqpb.StreamRequestType_AckMessage, seq)
	ack.ClientID = "someone-else"
	if r = s.do(ack); r.GetIsError() || r.GetStreamRequestTypeData() != kubemqpb.StreamRequestType_AckMessage {
		t.Fatalf("ack: %v", r)
	}
	s.ended()
	if n := len(e.pull(t, "sq", 10, true).GetMessages()); n != 0 {
		t.Fatalf("acked message still there (%d)", n)
	}

	// Reject: redelivered with ReceiveCount 2.
	e.send(t, msg("sq", "two"))
	s = e.stream(t)
	seq = s.do(receiveReq("sq", 10, 1)).GetMessage().GetAttributes().GetSequence()
	if r = s.do(settleReq(kubemqpb.StreamRequestType_RejectMessage, seq)); r.GetIsError() {
		t.Fatalf("reject: %v", r)
	}
	s.ended()
	s = e.stream(t)
	got = s.do(receiveReq("sq", 1, 1))
	if got.GetMessage().GetAttributes().GetReceiveCount() != 2 {
		t.Fatalf("after a reject: %v", got)
	}
	// The lease runs out: Error 129 and the end; the message is back.
	r = s.next()
	wantInBand(t, r.GetIsError(), r.GetError(), "Error 129")
	s.ended()

	// ModifyVisibility keeps the call open past the first lease.
	s = e.stream(t)
	seq = s.do(receiveReq("sq", 1, 1)).GetMessage().GetAttributes().GetSequence()
	if r = s.do(&kubemqpb.StreamQueueMessagesRequest{StreamRequestTypeData: kubemqpb.StreamRequestType_ModifyVisibility,
		VisibilitySeconds: 5, RefSequence: seq}); r.GetIsError() {
		t.Fatalf("modify visibility: %v", r)
	}
	time.Sleep(2 * time.Second)
	r = s.do(&kubemqpb.StreamQueueMessagesRequest{StreamRequestTypeData: kubemqpb.StreamRequestType_ModifyVisibility,
		VisibilitySeconds: 43201})
	wantInBand(t, r.GetIsError(), r.GetError(), "Error 127")
	// Resend to another channel: it arrives there fresh, the source is empty.
	if r = s.do(&kubemqpb.StreamQueueMessagesRequest{StreamRequestTypeData: kubemqpb.StreamRequestType_ResendMessage,
		Channel: "sq-other"}); r.GetIsError() {
		t.Fatalf("resend: %v", r)
	}
	s.ended()
	moved := e.pull(t, "sq-other", 10, false).GetMessages()
	if len(moved) != 1 || moved[0].GetAttributes().GetReceiveCount() != 1 || string(moved[0].GetBody()) != "two" {
		t.Fatalf("resent: %v", moved)
	}
	if n := len(e.pull(t, "sq", 10, true).GetMessages()); n != 0 {
		t.Fatalf("the resent message stayed (%d)", n)
	}

	// SendModifiedMessage: the new message lands, the original is gone.
	e.send(t, msg("sq", "three"))
	s = e.stream(t)
	s.do(receiveReq("sq", 10, 1))
	r = s.do(&kubemqpb.StreamQueueMessagesRequest{StreamRequestTypeData: kubemqpb.StreamRequestType_SendModifiedMessage})
	wantInBand(t, r.GetIsError(), r.GetError(), "Error 131")
	if r = s.do(&kubemqpb.StreamQueueMessagesRequest{StreamRequestTypeData: kubemqpb.StreamRequestType_SendModifiedMessage,
		ModifiedMessage: msg("sq-mod", "three, modified")}); r.GetIsError() {
		t.Fatalf("send modified: %v", r)
	}
	s.ended()
	if m := e.pull(t, "sq-mod", 10, false).GetMessages(); len(m) != 1 || string(m[0].GetBody()) != "three, modified" {
		t.Fatalf("modified: %v", m)
	}
	if n := len(e.pull(t, "sq", 10, true).GetMessages()); n != 0 {
		t.Fatalf("the original stayed (%d)", n)
	}

	// Settles without a message.
	s = e.stream(t)
	r = s.do(settleReq(kubemqpb.StreamRequestType_AckMessage, 1))
	wantInBand(t, r.GetIsError(), r.GetError(), "Error 124")
	r = s.do(settleReq(kubemqpb.StreamRequestType_RejectMessage, 1))
	wantInBand(t, r.GetIsError(), r.GetError(), "Error 137")
	r = s.do(&kubemqpb.StreamQueueMessagesRequest{StreamRequestTypeData: kubemqpb.StreamRequestType_ResendMessage, Channel: "x"})
	wantInBand(t, r.GetIsError(), r.GetError(), "Error 126")
	r = s.do(receiveReq("sq", 43201, 1))
	wantInBand(t, r.GetIsError(), r.GetError(), "Error 127")
	s.ended()

	// A client that goes away while holding a message releases it at once.
	e.send(t, msg("sq", "four"))
	s = e.stream(t)
	s.do(receiveReq("sq", 600, 1))
	s.cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		m := e.pull(t, "sq", 1, false).GetMessages()
		if len(m) == 1 {
			if m[0].GetAttributes().GetReceiveCount() != 2 {
				t.Fatalf("released: %v", m[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a cancelled stream's message was not released")
		}
	}
}
