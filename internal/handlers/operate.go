package handlers

import (
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/wire"
)

func (h *api) browse(c *gin.Context) {
	limit, ok := queryInt(c, "limit", 100)
	if !ok {
		return
	}
	msgs, next, err := h.svc.BrowseMessages(c.Request.Context(), tenant(c), c.Param("queue"), c.Query("state"), limit, c.Query("cursor"))
	if err != nil {
		fail(c, err)
		return
	}
	writePage(c, len(msgs), func(i int) wire.Message {
		m := toBrowsed(msgs[i])
		msgs[i] = service.BrowsedMessage{} // m holds the body until it is written
		return m
	}, next)
}

func (h *api) getMessage(c *gin.Context) {
	m, err := h.svc.GetMessage(c.Request.Context(), tenant(c), c.Param("queue"), c.Param("messageId"))
	if id := c.Param("messageId"); service.KindOf(err) == service.KindNotFound && (id == "receive" || id == "batch") {
		// A message may be called "receive", but a reader of this answer
		// most likely sent a GET to a POST route.
		abortWith(c, http.StatusNotFound, "not_found", fmt.Sprintf(
			"message %q is not in queue %q; to %s, POST /v1/queues/{queue}/messages/%s", id, c.Param("queue"), map[string]string{"receive": "receive messages", "batch": "send a batch"}[id], id), nil)
		return
	}
	if err != nil {
		fail(c, err)
		return
	}
	answerJSON(c, http.StatusOK, toBrowsed(m))
}

func (h *api) messageHistory(c *gin.Context) {
	events, err := h.svc.MessageHistory(c.Request.Context(), tenant(c), c.Param("queue"), c.Param("messageId"))
	if err != nil {
		fail(c, err)
		return
	}
	out := wire.History{Events: make([]wire.HistoryEvent, len(events))}
	for i, e := range events {
		out.Events[i] = toHistoryEvent(e)
	}
	answerJSON(c, http.StatusOK, out)
}

func (h *api) deleteMessage(c *gin.Context) {
	if err := h.svc.DeleteMessage(c.Request.Context(), tenant(c), c.Param("queue"), c.Param("messageId")); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *api) listDeadLettered(c *gin.Context) {
	limit, ok := queryInt(c, "limit", 100)
	if !ok {
		return
	}
	filter := service.DeadLetteredFilter{SourceQueue: c.Query("sourceQueue"), Cause: c.Query("cause")}
	msgs, next, err := h.svc.ListDeadLettered(c.Request.Context(), tenant(c), filter, limit, c.Query("cursor"))
	if err != nil {
		fail(c, err)
		return
	}
	writePage(c, len(msgs), func(i int) wire.Message {
		m := toMessage(msgs[i])
		msgs[i] = service.Message{} // m holds the body until it is written
		return m
	}, next)
}

func (h *api) redrive(c *gin.Context) {
	var req wire.RedriveRequest
	if !decode(c, &req) {
		return
	}
	r, err := h.svc.Redrive(c.Request.Context(), tenant(c), c.Param("queue"), c.Param("messageId"), req.ToQueue)
	if err != nil {
		fail(c, err)
		return
	}
	answerJSON(c, http.StatusOK, wire.RedriveResult{RedrivenAs: wire.Redriven{Queue: r.Queue, MessageID: r.MessageID, Sequence: r.Sequence}})
}

func (h *api) redriveQueue(c *gin.Context) {
	var req wire.RedriveQueueRequest
	if !decode(c, &req) {
		return
	}
	max := 10000
	if req.MaxMessages != nil {
		max = *req.MaxMessages
	}
	moved, remaining, err := h.svc.RedriveQueue(c.Request.Context(), tenant(c), c.Param("queue"), req.ToQueue, max)
	if err != nil {
		fail(c, err)
		return
	}
	answerJSON(c, http.StatusOK, wire.RedriveQueueResult{Moved: moved, Remaining: remaining})
}
