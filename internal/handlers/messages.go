package handlers

import (
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"
	json "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/skipq/skipq/internal/service"
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
		DeadLetterQueue: dlq, GroupID: r.GroupID,
	}, nil
}

func batchPath(i int) string { return fmt.Sprintf("messages[%d]", i) }

// batchIssues are the issues of a batch's messages that could not be read
// (bad[i] for message i), at paths from the request's root.
func batchIssues(bad []*service.Issue) []service.Issue {
	var issues []service.Issue
	for i, issue := range bad {
		if issue != nil {
			issues = append(issues, service.Issue{Path: batchPath(i) + issuePath(issue.Path), Message: issue.Message})
		}
	}
	return issues
}

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
	answerJSON(c, status, toSendResult(res))
}

// batchRequest is wire.SendBatchRequest as the handler reads it: each
// message on its own, so that one that cannot be read (a wrong type, an
// unknown field) is that message's issue, at a path relative to it.
type batchRequest struct {
	Messages batchMessages `json:"messages"`
	Atomic   *bool         `json:"atomic"`
}

type batchMessages struct {
	msgs []wire.SendRequest
	bad  []*service.Issue // bad[i]: why msgs[i] could not be read
}

// UnmarshalJSONFrom reads the array a message at a time: a message's value
// is decoded from the decoder's buffer, so the request is never held whole.
// Malformed JSON and a body over its limit still fail the whole request.
func (b *batchMessages) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if dec.PeekKind() != '[' {
		// null, or anything else: the decoder's own verdict on an array.
		return json.UnmarshalDecode(dec, &b.msgs)
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != ']' {
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		if b.msgs == nil {
			b.msgs = (*sendRequests.Get().(*[]wire.SendRequest))[:0]
		}
		// Decoded in its place in the slice: a message decoded aside and
		// then appended escaped to the heap, a copy each.
		b.msgs = append(b.msgs, wire.SendRequest{})
		var issue *service.Issue
		if err := json.Unmarshal(v, &b.msgs[len(b.msgs)-1], json.RejectUnknownMembers(true)); err != nil {
			issue = new(decodeIssue(err))
		}
		b.bad = append(b.bad, issue)
	}
	_, err := dec.ReadToken()
	return err
}

// sendRequests holds the slices batch sends decode their messages into,
// emptied: a batch of 100 grew its slice eight times, some 40 KB a request
// (a tenth of what the node allocated for it), where its MessageInputs
// copy out what they keep.
var sendRequests = sync.Pool{New: func() any { return new([]wire.SendRequest) }}

// maxPooledSendRequests bounds the slices kept: a batch of thousands of
// small messages is rare, and its slice is not held for the next request.
const maxPooledSendRequests = 1024

// release gives the decoded messages' slice back, emptied so it keeps no
// body alive; b.msgs must not be read after.
func (b *batchMessages) release() {
	if b.msgs == nil || cap(b.msgs) > maxPooledSendRequests {
		return
	}
	clear(b.msgs) // past its length it was emptied before, and appends write zero values
	msgs := b.msgs[:0]
	b.msgs = nil
	sendRequests.Put(&msgs)
}

func (h *api) sendBatch(c *gin.Context) {
	var req batchRequest
	defer req.Messages.release()
	if !decode(c, &req) {
		return
	}
	in := make([]service.MessageInput, len(req.Messages.msgs))
	bad := req.Messages.bad
	for i, m := range req.Messages.msgs {
		if bad[i] != nil {
			continue
		}
		var issue *service.Issue
		if in[i], issue = sendInput(m, ""); issue != nil {
			bad[i] = issue
		}
	}
	req.Messages.release() // in holds what the send needs
	if req.Atomic != nil && !*req.Atomic {
		h.sendEach(c, in, bad)
		return
	}
	if issues := batchIssues(bad); len(issues) > 0 {
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
	// answerJSON's bytes, appended by hand (wire.SendBatchResult.AppendJSON).
	c.Data(http.StatusCreated, jsonContentType, append(out.AppendJSON(make([]byte, 0, 160*len(res)+16)), '\n'))
}

// sendEach answers a batch with "atomic": false (docs/API.md#send): each entry
// answers its result or its error, a message that could not be read too.
func (h *api) sendEach(c *gin.Context, in []service.MessageInput, bad []*service.Issue) {
	res, err := h.svc.SendEach(c.Request.Context(), tenant(c), c.Param("queue"), in, bad)
	if err != nil {
		fail(c, err)
		return
	}
	out := wire.SendEachResult{Results: make([]wire.SendEachEntry, len(res))}
	for i, r := range res {
		if r.Err != nil {
			out.Results[i].Error = entryError(r.Err)
		} else {
			out.Results[i].SendResult = new(toSendResult(r.Result))
		}
	}
	answerJSON(c, http.StatusOK, out)
}

// entryError is a message's error in a batch: the envelope's code, message
// and issues, without the request's id.
func entryError(e *service.Error) *wire.EntryError {
	_, code := statusOf(e.Kind)
	out := &wire.EntryError{Code: code, Message: e.Message, Issues: []wire.Issue{}}
	for _, is := range e.Issues {
		out.Issues = append(out.Issues, wire.Issue(is))
	}
	return out
}

// issuePath appends a path relative to a message to the message's path.
func issuePath(rel string) string {
	if rel == "" || strings.HasPrefix(rel, "[") {
		return rel
	}
	return "." + rel
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
	o := service.ReceiveOptions{MaxMessages: req.MaxMessages, VisibilitySeconds: req.VisibilitySeconds,
		WaitSeconds: req.WaitSeconds, IsPeek: req.IsPeek, AutoAck: req.AutoAck, MaxMessagesPerGroup: req.MaxMessagesPerGroup}
	if req.Ack == nil {
		msgs, err := h.svc.Receive(c.Request.Context(), tenant(c), c.Param("queue"), o)
		if err != nil {
			fail(c, err)
			return
		}
		writeMessages(c, msgs)
		return
	}
	msgs, acked, err := h.svc.AckAndReceive(c.Request.Context(), tenant(c), c.Param("queue"), req.Ack, o)
	if err != nil {
		fail(c, err)
		return
	}
	tail, _ := json.Marshal(settleResult(acked)) // plain values always marshal
	writeMessagesThen(c, msgs, `"acked":`+string(tail))
}
