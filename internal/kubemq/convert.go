package kubemq

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"maps"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/skipq/skipq/internal/kubemq/kubemqpb"
	"github.com/skipq/skipq/internal/service"
)

// GroupTag is the tag that names a message's FIFO group over KubeMQ, whose
// messages have no group field: sent, it becomes the message's groupId
// (and is not stored as a tag); received, it shows the groupId.
const GroupTag = "skipq.groupId"

// nanos is t in Unix nanoseconds, KubeMQ's unit for every time it sends; 0
// for none.
func nanos(t *time.Time) int64 {
	if t == nil {
		return 0
	}
	return t.UnixNano()
}

// requestID is the client's id of a request, or a new one when it sent
// none (KubeMQ echoes a server-made id then).
func requestID(id string) string {
	if id != "" {
		return id
	}
	return uuid.NewString()
}

// messageInput checks a KubeMQ message as KubeMQ does (its error codes)
// against the node's limits and translates it; the service then checks
// what only skipq refuses (answered as invalid messages).
func (s *Server) messageInput(m *kubemqpb.QueueMessage) (service.MessageInput, error) {
	lim := s.svc.Limits()
	p := m.GetPolicy()
	switch {
	case m.GetClientID() == "":
		return service.MessageInput{}, refuse(errClientID)
	case service.ValidQueueName(m.GetChannel()) != "":
		return service.MessageInput{}, refuse(errQueueName)
	case len(m.GetBody()) == 0 && m.GetMetadata() == "":
		return service.MessageInput{}, refuse(errEmptyMessage)
	case p.GetExpirationSeconds() < 0 || int(p.GetExpirationSeconds()) > lim.MaxExpirationSeconds:
		return service.MessageInput{}, refuse(errExpiration)
	case p.GetMaxReceiveCount() < 0 || int(p.GetMaxReceiveCount()) > lim.MaxReceiveCount:
		return service.MessageInput{}, refuse(errMaxReceiveCount)
	case p.GetDelaySeconds() < 0 || int(p.GetDelaySeconds()) > lim.MaxDelaySeconds:
		return service.MessageInput{}, refuse(errDelay)
	case p.GetMaxReceiveQueue() != "" && service.ValidQueueName(p.GetMaxReceiveQueue()) != "":
		return service.MessageInput{}, refuse(errQueueName)
	}
	in := service.MessageInput{Metadata: m.GetMetadata(), ClientID: m.GetClientID(), MessageID: m.GetMessageID()}
	// Text stays text for HTTP and SQS readers; other bytes travel as
	// base64, which the service stores as the bytes they spell.
	if body := m.GetBody(); utf8.Valid(body) {
		in.Body = string(body)
	} else {
		in.Body, in.BodyEncoding = base64.StdEncoding.EncodeToString(body), "base64"
	}
	if len(m.GetTags()) > 0 {
		in.Tags = maps.Clone(m.GetTags())
		if g, ok := in.Tags[GroupTag]; ok {
			in.GroupID = g
			delete(in.Tags, GroupTag)
		}
	}
	// 0 leaves each policy to the queue's default (KubeMQ's 0 is "none",
	// which is a new queue's default too).
	positive := func(v int32) *int {
		if v <= 0 {
			return nil
		}
		n := int(v)
		return &n
	}
	in.ExpirationSeconds = positive(p.GetExpirationSeconds())
	in.DelaySeconds = positive(p.GetDelaySeconds())
	in.MaxReceiveCount = positive(p.GetMaxReceiveCount())
	if q := p.GetMaxReceiveQueue(); q != "" {
		in.DeadLetterQueue = &q
	}
	return in, nil
}

func sendResult(r service.SendResult) *kubemqpb.SendQueueMessageResult {
	return &kubemqpb.SendQueueMessageResult{MessageID: r.MessageID, SentAt: r.SentAt.UnixNano(),
		ExpirationAt: nanos(r.ExpiresAt), DelayedTo: nanos(r.DelayedTo)}
}

func failedSend(messageID, text string) *kubemqpb.SendQueueMessageResult {
	return &kubemqpb.SendQueueMessageResult{MessageID: messageID, IsError: true, Error: text}
}

// queueMessage is a received message as KubeMQ shows it. Its Sequence is
// skipq's, the settle key of the streams.
func queueMessage(m service.Message) *kubemqpb.QueueMessage {
	sum := md5.Sum(m.Body)
	out := &kubemqpb.QueueMessage{
		MessageID: m.MessageID, ClientID: m.ClientID, Channel: m.Queue, Metadata: m.Metadata, Body: m.Body,
		Tags: m.Tags,
		Attributes: &kubemqpb.QueueMessageAttributes{
			Timestamp: m.SentAt.UnixNano(), Sequence: uint64(m.Sequence), MD5OfBody: hex.EncodeToString(sum[:]),
			// DelayedTo stays 0: a message is received once its delay is over,
			// and KubeMQ clears it then.
			ReceiveCount: int32(m.ReceiveCount), ExpirationAt: nanos(m.ExpiresAt),
		},
	}
	if m.ReRoutedFrom != nil {
		out.Attributes.ReRouted, out.Attributes.ReRoutedFromQueue = true, *m.ReRoutedFrom
	}
	if m.GroupID != nil {
		out.Tags = maps.Clone(m.Tags)
		if out.Tags == nil {
			out.Tags = map[string]string{}
		}
		out.Tags[GroupTag] = *m.GroupID
	}
	return out
}

func queueMessages(msgs []service.Message) []*kubemqpb.QueueMessage {
	out := make([]*kubemqpb.QueueMessage, len(msgs))
	for i, m := range msgs {
		out[i] = queueMessage(m)
	}
	return out
}
