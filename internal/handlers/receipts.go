package handlers

import (
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/wire"
)

// settleHandles validates the handle fields; single reports the single form.
func settleHandles(r wire.SettleRequest) (handles []string, single bool, err error) {
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

// settleResult is the list-form answer of a settle.
func settleResult(res service.SettleResult) wire.SettleResult {
	out := wire.SettleResult{Succeeded: res.Succeeded, Failed: []wire.SettleFailure{}}
	for _, f := range res.Failed {
		out.Failed = append(out.Failed, wire.SettleFailure{ReceiptHandle: f.ReceiptHandle, Code: codeOf(f.Err.Kind), Message: f.Err.Message})
	}
	return out
}

// writeSettle answers a settle with out: the single form is 200 or the
// handle's error (receipt_stale); the list form is always 200 with
// per-handle failures.
func writeSettle(c *gin.Context, res service.SettleResult, single bool, out any) {
	if single && len(res.Failed) > 0 {
		fail(c, res.Failed[0].Err)
		return
	}
	answerJSON(c, http.StatusOK, out)
}

// decodeHandles decodes a receipt route's body into req (which embeds hr)
// and returns its handles, answering 400 itself when they are malformed.
func decodeHandles(c *gin.Context, req any, hr *wire.SettleRequest) ([]string, bool, bool) {
	if !decode(c, req) {
		return nil, false, false
	}
	handles, single, err := settleHandles(*hr)
	if err != nil {
		fail(c, err)
		return nil, false, false
	}
	return handles, single, true
}

func (h *api) ack(c *gin.Context) {
	var req wire.SettleRequest
	handles, single, ok := decodeHandles(c, &req, &req)
	if !ok {
		return
	}
	res, err := h.svc.Ack(c.Request.Context(), handles)
	if err != nil {
		fail(c, err)
		return
	}
	writeSettle(c, res, single, settleResult(res))
}

func (h *api) nack(c *gin.Context) {
	var req wire.NackRequest
	handles, single, ok := decodeHandles(c, &req, &req.SettleRequest)
	if !ok {
		return
	}
	res, err := h.svc.Nack(c.Request.Context(), handles, req.Reason)
	if err != nil {
		fail(c, err)
		return
	}
	writeSettle(c, res, single, settleResult(res))
}

func (h *api) visibility(c *gin.Context) {
	var req wire.VisibilityRequest
	handles, single, ok := decodeHandles(c, &req, &req.SettleRequest)
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
	out := wire.VisibilityResult{SettleResult: settleResult(res.SettleResult)}
	if single {
		if t, ok := res.VisibleUntil[handles[0]]; ok {
			out.VisibleUntil = &wire.Time{Time: t}
		}
	}
	writeSettle(c, res.SettleResult, single, out)
}

func (h *api) requeue(c *gin.Context) {
	var req wire.RequeueRequest
	handles, single, ok := decodeHandles(c, &req, &req.SettleRequest)
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
	writeSettle(c, res, single, settleResult(res))
}
