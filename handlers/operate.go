package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/service"
)

type browsedJSON struct {
	messageJSON
	State     string `json:"state"`
	VisibleAt string `json:"visibleAt"`
}

func toBrowsedJSON(m service.BrowsedMessage) browsedJSON {
	return browsedJSON{messageJSON: toMessageJSON(m.Message), State: m.State, VisibleAt: ts(m.VisibleAt)}
}

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
	writePage(c, len(msgs), func(i int) any {
		m := toBrowsedJSON(msgs[i])
		msgs[i] = service.BrowsedMessage{} // m holds the body until it is written
		return m
	}, next)
}

func (h *api) getMessage(c *gin.Context) {
	m, err := h.svc.GetMessage(c.Request.Context(), tenant(c), c.Param("queue"), c.Param("messageId"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toBrowsedJSON(m))
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
	msgs, next, err := h.svc.ListDeadLettered(c.Request.Context(), tenant(c), c.Query("sourceQueue"), limit, c.Query("cursor"))
	if err != nil {
		fail(c, err)
		return
	}
	writePage(c, len(msgs), func(i int) any {
		m := toMessageJSON(msgs[i])
		msgs[i] = service.Message{} // m holds the body until it is written
		return m
	}, next)
}

type redriveRequest struct {
	ToQueue string `json:"toQueue"`
}

func (h *api) redrive(c *gin.Context) {
	var req redriveRequest
	if !decode(c, &req) {
		return
	}
	r, err := h.svc.Redrive(c.Request.Context(), tenant(c), c.Param("queue"), c.Param("messageId"), req.ToQueue)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"redrivenAs": gin.H{"queue": r.Queue, "messageId": r.MessageID, "sequence": r.Sequence}})
}

type redriveQueueRequest struct {
	ToQueue     string `json:"toQueue"`
	MaxMessages *int   `json:"maxMessages"`
}

func (h *api) redriveQueue(c *gin.Context) {
	var req redriveQueueRequest
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
	c.JSON(http.StatusOK, gin.H{"moved": moved, "remaining": remaining})
}
