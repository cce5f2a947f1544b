package kubemq

import (
	"context"
	"encoding/json"
	"time"

	"github.com/skipq/skipq/internal/kubemq/kubemqpb"
	"github.com/skipq/skipq/internal/service"
)

// managementChannel is where KubeMQ's SDKs send their channel queries.
const managementChannel = "kubemq.cluster.internal.requests"

// channelInfo is one entry of list-channels' answer.
type channelInfo struct {
	Name         string       `json:"name"`
	Type         string       `json:"type"`
	LastActivity int64        `json:"lastActivity"`
	IsActive     bool         `json:"isActive"`
	Incoming     channelStats `json:"incoming"`
	Outgoing     channelStats `json:"outgoing"`
}

type channelStats struct {
	Messages  int64 `json:"messages"`
	Volume    int64 `json:"volume"`
	Responses int64 `json:"responses"`
	Waiting   int64 `json:"waiting"`
	Expired   int64 `json:"expired"`
	Delayed   int64 `json:"delayed"`
}

// SendRequest serves the queue-channel management queries (create-channel,
// delete-channel, list-channels with tag channel_type=queues); every other
// command or query is not served. A refusal travels in Error, as KubeMQ's
// SDKs read it.
func (a *api) SendRequest(ctx context.Context, r *kubemqpb.Request) (*kubemqpb.Response, error) {
	if r.GetChannel() != managementChannel || r.GetRequestTypeData() != kubemqpb.Request_Query ||
		r.GetTags()["channel_type"] != "queues" {
		return nil, errNotServed
	}
	resp := &kubemqpb.Response{ClientID: r.GetClientID(), RequestID: requestID(r.GetRequestID()),
		ReplyChannel: r.GetReplyChannel(), Timestamp: time.Now().UnixNano(), Executed: true}
	tenant, channel := identityOf(ctx).tenant, r.GetTags()["channel"]
	var err error
	switch r.GetMetadata() {
	case "create-channel":
		if err = requireRole(ctx, roleAdmin); err != nil {
			return nil, err
		}
		_, _, err = a.s.svc.PutQueue(ctx, tenant, channel, service.QueueSettings{})
	case "delete-channel":
		if err = requireRole(ctx, roleAdmin); err != nil {
			return nil, err
		}
		err = a.s.svc.DeleteQueue(ctx, tenant, channel)
	case "list-channels":
		resp.Body, err = a.s.listChannels(ctx, tenant, r.GetTags()["channel_search"])
	default:
		return nil, errNotServed
	}
	switch service.KindOf(err) {
	case service.KindInvalid, service.KindNotFound, service.KindQueueTypeMismatch:
		resp.Executed, resp.Error = false, err.Error()
		return resp, nil
	}
	if err != nil {
		return nil, statusOf(err)
	}
	return resp, nil
}

func (s *Server) listChannels(ctx context.Context, tenant, search string) ([]byte, error) {
	qs, _, err := s.svc.ListQueues(ctx, tenant, search, 1000, "")
	if err != nil {
		return nil, err
	}
	out := make([]channelInfo, 0, len(qs))
	for _, q := range qs {
		full, err := s.svc.GetQueue(ctx, tenant, q.Name)
		if service.KindOf(err) == service.KindNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		st := full.Stats
		out = append(out, channelInfo{Name: q.Name, Type: "queues", IsActive: true,
			Incoming: channelStats{Messages: st.Available + st.Delayed + st.InFlight, Waiting: st.Available, Delayed: st.Delayed}})
	}
	return json.Marshal(out)
}
