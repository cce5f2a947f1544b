package handlers

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/service"
)

type putQueueRequest struct {
	VisibilitySeconds  *int    `json:"visibilitySeconds"`
	ReceiveWaitSeconds *int    `json:"receiveWaitSeconds"`
	DelaySeconds       *int    `json:"delaySeconds"`
	ExpirationSeconds  *int    `json:"expirationSeconds"`
	MaxReceiveCount    *int    `json:"maxReceiveCount"`
	DeadLetterQueue    *string `json:"deadLetterQueue"`
	DedupWindowSeconds *int    `json:"dedupWindowSeconds"`
}

func (h *api) putQueue(c *gin.Context) {
	var req putQueueRequest
	if !decode(c, &req) {
		return
	}
	q, created, err := h.svc.PutQueue(c.Request.Context(), tenant(c), c.Param("queue"), service.QueueSettings(req))
	if err != nil {
		fail(c, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	c.JSON(status, toQueueJSON(q))
}

func (h *api) getQueue(c *gin.Context) {
	q, err := h.svc.GetQueue(c.Request.Context(), tenant(c), c.Param("queue"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toQueueJSON(q))
}

type queueListJSON struct {
	Queues     []queueJSON `json:"queues"`
	NextCursor *string     `json:"nextCursor,omitempty"`
}

func (h *api) listQueues(c *gin.Context) {
	limit, ok := queryInt(c, "limit", 100)
	if !ok {
		return
	}
	qs, next, err := h.svc.ListQueues(c.Request.Context(), tenant(c), c.Query("prefix"), limit, c.Query("cursor"))
	if err != nil {
		fail(c, err)
		return
	}
	out := queueListJSON{Queues: make([]queueJSON, len(qs))}
	for i, q := range qs {
		out.Queues[i] = toQueueJSON(q)
	}
	if next != "" {
		out.NextCursor = &next
	}
	c.JSON(http.StatusOK, out)
}

func (h *api) deleteQueue(c *gin.Context) {
	if err := h.svc.DeleteQueue(c.Request.Context(), tenant(c), c.Param("queue")); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *api) purgeQueue(c *gin.Context) {
	var req struct{}
	if !decode(c, &req) {
		return
	}
	n, err := h.svc.PurgeQueue(c.Request.Context(), tenant(c), c.Param("queue"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"purged": n})
}

// queryInt reads an optional integer query parameter, answering 400 itself
// when it is not one.
func queryInt(c *gin.Context, name string, def int) (int, bool) {
	raw, ok := c.GetQuery(name)
	if !ok || raw == "" {
		return def, true
	}
	v, err := strconv.Atoi(raw)
	if err != nil {
		fail(c, service.Invalid(service.Issue{Path: name, Message: "must be an integer"}))
		return 0, false
	}
	return v, true
}
