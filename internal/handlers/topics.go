package handlers

import (
	"net/http"
	"reflect"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/wire"
)

func (h *api) putTopic(c *gin.Context) {
	var req wire.TopicSettings
	if !decode(c, &req) {
		return
	}
	t, created, err := h.svc.PutTopic(c.Request.Context(), tenant(c), c.Param("topic"), service.TopicSettings(req))
	if err != nil {
		fail(c, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	answerJSON(c, status, toTopic(t))
}

func (h *api) getTopic(c *gin.Context) {
	t, err := h.svc.GetTopic(c.Request.Context(), tenant(c), c.Param("topic"))
	if err != nil {
		fail(c, err)
		return
	}
	answerJSON(c, http.StatusOK, toTopic(t))
}

func (h *api) listTopics(c *gin.Context) {
	limit, ok := queryInt(c, "limit", 100)
	if !ok {
		return
	}
	ts, next, err := h.svc.ListTopics(c.Request.Context(), tenant(c), limit, c.Query("cursor"))
	if err != nil {
		fail(c, err)
		return
	}
	out := wire.TopicPage{Topics: make([]wire.TopicSummary, len(ts))}
	for i, t := range ts {
		out.Topics[i] = wire.TopicSummary{Name: t.Name, FIFO: t.FIFO, DedupWindowSeconds: t.DedupWindowSeconds,
			RetainSeconds: t.RetainSeconds, Subscriptions: t.Subscriptions, Published: t.Published,
			Delivered: t.Delivered, Unrouted: t.Unrouted, CreatedAt: wire.At(t.CreatedAt), UpdatedAt: wire.At(t.UpdatedAt)}
	}
	if next != "" {
		out.NextCursor = &next
	}
	answerJSON(c, http.StatusOK, out)
}

func toTopic(t service.Topic) wire.Topic {
	out := wire.Topic{Name: t.Name, FIFO: t.FIFO, DedupWindowSeconds: t.DedupWindowSeconds,
		RetainSeconds: t.RetainSeconds, Subscriptions: make([]wire.Subscription, len(t.SubscriptionList)),
		Published: t.Published, Delivered: t.Delivered, Unrouted: t.Unrouted,
		CreatedAt: wire.At(t.CreatedAt), UpdatedAt: wire.At(t.UpdatedAt)}
	for i, s := range t.SubscriptionList {
		out.Subscriptions[i] = wire.Subscription{Queue: s.Queue, CreatedAt: wire.At(s.CreatedAt),
			ReplayFrom: wire.AtPtr(s.ReplayFrom)}
		if s.Filter != nil {
			out.Subscriptions[i].Filter = &wire.TopicFilter{Tags: s.Filter.Tags}
		}
	}
	return out
}

func (h *api) deleteTopic(c *gin.Context) {
	if err := h.svc.DeleteTopic(c.Request.Context(), tenant(c), c.Param("topic")); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *api) subscribe(c *gin.Context) {
	var req wire.SubscribeRequest
	if c.Request.ContentLength != 0 && !decode(c, &req) {
		return
	}
	var filter *service.TopicFilter
	if req.Filter != nil {
		filter = &service.TopicFilter{Tags: req.Filter.Tags}
	}
	var replayFrom *time.Time
	if req.ReplayFrom != nil {
		replayFrom = &req.ReplayFrom.Time
	}
	created, err := h.svc.Subscribe(c.Request.Context(), tenant(c), c.Param("topic"), c.Param("queue"), filter, replayFrom)
	if err != nil {
		fail(c, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	t, err := h.svc.GetTopic(c.Request.Context(), tenant(c), c.Param("topic"))
	if err != nil {
		fail(c, err)
		return
	}
	answerJSON(c, status, toTopic(t))
}

func (h *api) unsubscribe(c *gin.Context) {
	if err := h.svc.Unsubscribe(c.Request.Context(), tenant(c), c.Param("topic"), c.Param("queue")); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func toPublishResult(r service.PublishResult) wire.PublishResult {
	return wire.PublishResult{MessageID: r.MessageID, PublishedAt: wire.At(r.PublishedAt), DeliveredTo: r.DeliveredTo,
		Duplicate: r.Duplicate}
}

// publish takes one message, or a batch under "messages" (all or nothing,
// unless "atomic": false).
func (h *api) publish(c *gin.Context) {
	var req wire.PublishRequest
	if !decode(c, &req) {
		return
	}
	ctx, topic := c.Request.Context(), c.Param("topic")
	if req.Messages == nil {
		if req.Atomic != nil {
			fail(c, service.Invalid(service.Issue{Path: "atomic", Message: "applies to a batch (messages) only"}))
			return
		}
		in, issue := sendInput(req.SendRequest, "")
		if issue != nil {
			fail(c, service.Invalid(*issue))
			return
		}
		res, err := h.svc.Publish(ctx, tenant(c), topic, []service.MessageInput{in}, func(int) string { return "" })
		if err != nil {
			fail(c, err)
			return
		}
		status := http.StatusCreated
		if res[0].Duplicate {
			status = http.StatusOK
		}
		answerJSON(c, status, toPublishResult(res[0]))
		return
	}
	if !reflect.ValueOf(req.SendRequest).IsZero() {
		fail(c, service.Invalid(service.Issue{Path: "messages", Message: "a batch carries its fields in each message"}))
		return
	}
	in := make([]service.MessageInput, len(req.Messages))
	bad := make([]*service.Issue, len(req.Messages))
	for i, m := range req.Messages {
		in[i], bad[i] = sendInput(m, "")
	}
	if req.Atomic != nil && !*req.Atomic {
		res, err := h.svc.PublishEach(ctx, tenant(c), topic, in, bad)
		if err != nil {
			fail(c, err)
			return
		}
		out := wire.PublishEachResult{Results: make([]wire.PublishEachEntry, len(res))}
		for i, r := range res {
			if r.Err != nil {
				out.Results[i].Error = entryError(r.Err)
			} else {
				out.Results[i].PublishResult = new(toPublishResult(r.Result))
			}
		}
		answerJSON(c, http.StatusOK, out)
		return
	}
	if issues := batchIssues(bad); len(issues) > 0 {
		fail(c, service.Invalid(issues...))
		return
	}
	res, err := h.svc.Publish(ctx, tenant(c), topic, in, batchPath)
	if err != nil {
		fail(c, err)
		return
	}
	out := wire.PublishBatchResult{Results: make([]wire.PublishResult, len(res))}
	for i, r := range res {
		out.Results[i] = toPublishResult(r)
	}
	answerJSON(c, http.StatusCreated, out)
}

func (h *api) topicMessage(c *gin.Context) {
	groups, err := h.svc.TopicMessage(c.Request.Context(), tenant(c), c.Param("topic"), c.Param("messageId"))
	if err != nil {
		fail(c, err)
		return
	}
	out := wire.TopicMessage{MessageID: c.Param("messageId"), ConsumerGroups: make([]wire.GroupState, len(groups))}
	for i, g := range groups {
		out.ConsumerGroups[i] = wire.GroupState{Queue: g.Queue, State: g.State, ReceiveCount: g.ReceiveCount,
			LeaseExpiresAt: wire.AtPtr(g.LeaseExpiresAt), Consumed: g.Consumed}
	}
	answerJSON(c, http.StatusOK, out)
}
