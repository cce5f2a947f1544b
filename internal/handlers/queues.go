package handlers

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/wire"
)

func (h *api) putQueue(c *gin.Context) {
	var req wire.QueueSettings
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
	answerJSON(c, status, toQueue(q))
}

func (h *api) getQueue(c *gin.Context) {
	q, err := h.svc.GetQueue(c.Request.Context(), tenant(c), c.Param("queue"))
	if err != nil {
		fail(c, err)
		return
	}
	answerJSON(c, http.StatusOK, toQueue(q))
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
	out := wire.QueuePage{Queues: make([]wire.Queue, len(qs))}
	for i, q := range qs {
		out.Queues[i] = toQueue(q)
	}
	if next != "" {
		out.NextCursor = &next
	}
	answerJSON(c, http.StatusOK, out)
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
	answerJSON(c, http.StatusOK, wire.PurgeResult{Purged: n})
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
