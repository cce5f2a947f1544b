package handlers

import (
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/wire"
)

// search answers GET /v1/messages: the caller's messages across queues,
// newest first (docs/API.md#search).
func (h *api) search(c *gin.Context) {
	limit, ok := queryInt(c, "limit", 100)
	if !ok {
		return
	}
	q := c.Request.URL.Query()
	o := service.SearchOptions{
		Queues: q["queue"], QueuePrefix: q.Get("queuePrefix"), States: q["state"],
		MessageID: q.Get("messageId"), GroupID: q.Get("groupId"), Limit: limit, Cursor: q.Get("cursor"),
	}
	var issues []service.Issue
	for _, p := range []struct {
		name string
		to   **time.Time
	}{{"sentAfter", &o.SentAfter}, {"sentBefore", &o.SentBefore}} {
		if raw := q.Get(p.name); raw != "" {
			t, err := time.Parse(time.RFC3339Nano, raw)
			if err != nil {
				issues = append(issues, service.Issue{Path: p.name, Message: "must be an RFC 3339 time"})
				continue
			}
			*p.to = &t
		}
	}
	for _, tag := range q["tag"] {
		key, value, found := strings.Cut(tag, ":")
		switch _, dup := o.Tags[key]; {
		case !found:
			issues = append(issues, service.Issue{Path: "tag", Message: "must be key:value"})
		case dup:
			issues = append(issues, service.Issue{Path: "tag", Message: "names key " + key + " twice"})
		default:
			if o.Tags == nil {
				o.Tags = map[string]string{}
			}
			o.Tags[key] = value
		}
	}
	if len(issues) > 0 {
		fail(c, service.Invalid(issues...))
		return
	}
	msgs, next, err := h.svc.SearchMessages(c.Request.Context(), tenant(c), o)
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
