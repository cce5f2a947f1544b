package handlers

import (
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/service"
)

// handlesRequest is the part every receipt route's body shares: exactly one
// of receiptHandle and receiptHandles.
type handlesRequest struct {
	ReceiptHandle  *string  `json:"receiptHandle"`
	ReceiptHandles []string `json:"receiptHandles"`
}

type visibilityRequest struct {
	handlesRequest
	VisibilitySeconds *int `json:"visibilitySeconds"`
}

type requeueRequest struct {
	handlesRequest
	Queue *string `json:"queue"`
}

// handles validates the handle fields; single reports the single form.
func (r handlesRequest) handles() (handles []string, single bool, err error) {
	switch {
	case r.ReceiptHandle != nil && r.ReceiptHandles != nil:
		return nil, false, service.Invalid(service.Issue{Path: "receiptHandles", Message: "give receiptHandle or receiptHandles, not both"})
	case r.ReceiptHandle != nil:
		if *r.ReceiptHandle == "" {
			return nil, false, service.Invalid(service.Issue{Path: "receiptHandle", Message: "must not be empty"})
		}
		return []string{*r.ReceiptHandle}, true, nil
	case r.ReceiptHandles == nil:
		return nil, false, service.Invalid(service.Issue{Path: "receiptHandle", Message: "receiptHandle or receiptHandles is required"})
	case len(r.ReceiptHandles) == 0 || len(r.ReceiptHandles) > service.MaxReceiptHandles:
		return nil, false, service.Invalid(service.Issue{Path: "receiptHandles",
			Message: fmt.Sprintf("must hold between 1 and %d handles", service.MaxReceiptHandles)})
	}
	return r.ReceiptHandles, false, nil
}

type settleFailureJSON struct {
	ReceiptHandle string `json:"receiptHandle"`
	Code          string `json:"code"`
	Message       string `json:"message"`
}

type settleResultJSON struct {
	Succeeded int                 `json:"succeeded"`
	Failed    []settleFailureJSON `json:"failed"`
}

// writeSettle answers a settle: the single form is 200 or the handle's error
// (receipt_stale); the list form is always 200 with per-handle failures.
func writeSettle(c *gin.Context, res service.SettleResult, single bool, extra gin.H) {
	if single && len(res.Failed) > 0 {
		fail(c, res.Failed[0].Err)
		return
	}
	out := settleResultJSON{Succeeded: res.Succeeded, Failed: []settleFailureJSON{}}
	for _, f := range res.Failed {
		out.Failed = append(out.Failed, settleFailureJSON{ReceiptHandle: f.ReceiptHandle, Code: codeOf(f.Err.Kind), Message: f.Err.Message})
	}
	if extra == nil {
		c.JSON(http.StatusOK, out)
		return
	}
	extra["succeeded"], extra["failed"] = out.Succeeded, out.Failed
	c.JSON(http.StatusOK, extra)
}

// decodeHandles decodes a receipt route's body into req (which embeds hr)
// and returns its handles, answering 400 itself when they are malformed.
func decodeHandles(c *gin.Context, req any, hr *handlesRequest) ([]string, bool, bool) {
	if !decode(c, req) {
		return nil, false, false
	}
	handles, single, err := hr.handles()
	if err != nil {
		fail(c, err)
		return nil, false, false
	}
	return handles, single, true
}

func (h *api) ack(c *gin.Context) {
	var req handlesRequest
	handles, single, ok := decodeHandles(c, &req, &req)
	if !ok {
		return
	}
	res, err := h.svc.Ack(c.Request.Context(), handles)
	if err != nil {
		fail(c, err)
		return
	}
	writeSettle(c, res, single, nil)
}

func (h *api) nack(c *gin.Context) {
	var req handlesRequest
	handles, single, ok := decodeHandles(c, &req, &req)
	if !ok {
		return
	}
	res, err := h.svc.Nack(c.Request.Context(), handles)
	if err != nil {
		fail(c, err)
		return
	}
	writeSettle(c, res, single, nil)
}

func (h *api) visibility(c *gin.Context) {
	var req visibilityRequest
	handles, single, ok := decodeHandles(c, &req, &req.handlesRequest)
	if !ok {
		return
	}
	if req.VisibilitySeconds == nil {
		fail(c, service.Invalid(service.Issue{Path: "visibilitySeconds", Message: "is required"}))
		return
	}
	res, err := h.svc.SetVisibility(c.Request.Context(), handles, *req.VisibilitySeconds)
	if err != nil {
		fail(c, err)
		return
	}
	var extra gin.H
	if single {
		if t, ok := res.VisibleUntil[handles[0]]; ok {
			extra = gin.H{"visibleUntil": ts(t)}
		}
	}
	writeSettle(c, res.SettleResult, single, extra)
}

func (h *api) requeue(c *gin.Context) {
	var req requeueRequest
	handles, single, ok := decodeHandles(c, &req, &req.handlesRequest)
	if !ok {
		return
	}
	if req.Queue == nil {
		fail(c, service.Invalid(service.Issue{Path: "queue", Message: "is required"}))
		return
	}
	res, err := h.svc.Requeue(c.Request.Context(), handles, *req.Queue)
	if err != nil {
		fail(c, err)
		return
	}
	writeSettle(c, res, single, nil)
}
