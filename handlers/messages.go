package handlers

import (
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/service"
	"github.com/skipq/skipq/wire"
)

// sendInput converts a send request; path prefixes the alias-conflict issue.
func sendInput(r wire.SendRequest, path string) (service.MessageInput, *service.Issue) {
	dlq := r.DeadLetterQueue
	if r.MaxReceiveQueue != nil {
		if dlq != nil && *dlq != *r.MaxReceiveQueue {
			return service.MessageInput{}, &service.Issue{Path: prefixed(path, "maxReceiveQueue"),
				Message: "is an alias of deadLetterQueue and must not differ from it"}
		}
		dlq = r.MaxReceiveQueue
	}
	return service.MessageInput{
		Body: r.Body, BodyEncoding: r.BodyEncoding, Metadata: r.Metadata, Tags: r.Tags,
		ClientID: r.ClientID, MessageID: r.MessageID, DelaySeconds: r.DelaySeconds,
		ExpirationSeconds: r.ExpirationSeconds, MaxReceiveCount: r.MaxReceiveCount,
		DeadLetterQueue: dlq,
	}, nil
}

func batchPath(i int) string { return fmt.Sprintf("messages[%d]", i) }

func prefixed(prefix, field string) string {
	if prefix == "" {
		return field
	}
	return prefix + "." + field
}

func (h *api) send(c *gin.Context) {
	var req wire.SendRequest
	if !decode(c, &req) {
		return
	}
	in, issue := sendInput(req, "")
	if issue != nil {
		fail(c, service.Invalid(*issue))
		return
	}
	res, err := h.svc.Send(c.Request.Context(), tenant(c), c.Param("queue"), in)
	if err != nil {
		fail(c, err)
		return
	}
	status := http.StatusCreated
	if res.Duplicate {
		status = http.StatusOK
	}
	c.JSON(status, toSendResult(res))
}

func (h *api) sendBatch(c *gin.Context) {
	var req wire.SendBatchRequest
	if !decode(c, &req) {
		return
	}
	in := make([]service.MessageInput, len(req.Messages))
	var issues []service.Issue
	for i, m := range req.Messages {
		var issue *service.Issue
		if in[i], issue = sendInput(m, batchPath(i)); issue != nil {
			issues = append(issues, *issue)
		}
	}
	if len(issues) > 0 {
		fail(c, service.Invalid(issues...))
		return
	}
	res, err := h.svc.SendBatch(c.Request.Context(), tenant(c), c.Param("queue"), in)
	if err != nil {
		fail(c, err)
		return
	}
	out := wire.SendBatchResult{Results: make([]wire.SendResult, len(res))}
	for i, r := range res {
		out.Results[i] = toSendResult(r)
	}
	c.JSON(http.StatusCreated, out)
}

func (h *api) receive(c *gin.Context) {
	var req wire.ReceiveRequest
	if !decode(c, &req) {
		return
	}
	if id, _ := identityOf(c); !req.IsPeek && id.Role < roleWrite {
		abortWith(c, http.StatusForbidden, "access_denied", "receiving needs a write key; a read key may only peek", nil)
		return
	}
	msgs, err := h.svc.Receive(c.Request.Context(), tenant(c), c.Param("queue"), service.ReceiveOptions(req))
	if err != nil {
		fail(c, err)
		return
	}
	writeMessages(c, msgs)
}
