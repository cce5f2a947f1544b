package console

import (
	"net/http"
	"slices"
	"strings"

	"github.com/skipq/skipq/internal/service"
)

type topicsData struct {
	Topics []service.Topic
	Cursor string
	Next   string
}

// topicsPage lists the tenant's topics with their subscription counts and
// counters.
func (c *Console) topicsPage(w http.ResponseWriter, r *http.Request, id identity) {
	d := topicsData{Cursor: r.URL.Query().Get("cursor")}
	var err error
	if d.Topics, d.Next, err = c.svc.ListTopics(r.Context(), id.Tenant, pageSize, d.Cursor); err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	c.renderView(w, r, http.StatusOK, "topics", "layout", view{Title: "Topics", Nav: "topics", ID: id, Data: d})
}

// topicGroup is one subscription with its queue's depth.
type topicGroup struct {
	service.Subscription
	Filter string
	Stats  *service.QueueStats
}

type topicData struct {
	Topic     service.Topic
	Groups    []topicGroup
	MessageID string
	// Across is the message's state in each group, when MessageID is set.
	Across []service.TopicMessageGroup
}

// topicPage shows a topic: its subscriptions with their filters and each
// group's depth, and, for a messageId, the message's state in each group.
func (c *Console) topicPage(w http.ResponseWriter, r *http.Request, id identity) {
	ctx := r.Context()
	t, err := c.svc.GetTopic(ctx, id.Tenant, r.PathValue("topic"))
	if err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	d := topicData{Topic: t, MessageID: strings.TrimSpace(r.URL.Query().Get("messageId"))}
	for _, s := range t.SubscriptionList {
		g := topicGroup{Subscription: s, Filter: filterText(s.Filter)}
		if q, err := c.svc.GetQueue(ctx, id.Tenant, s.Queue); err == nil {
			g.Stats = q.Stats
		} else if service.KindOf(err) != service.KindNotFound {
			c.serviceError(w, r, id, err)
			return
		}
		d.Groups = append(d.Groups, g)
	}
	if d.MessageID != "" {
		if d.Across, err = c.svc.TopicMessage(ctx, id.Tenant, t.Name, d.MessageID); err != nil {
			c.serviceError(w, r, id, err)
			return
		}
	}
	c.renderView(w, r, http.StatusOK, "topic", "layout", view{Title: "Topic " + t.Name, Nav: "topics", ID: id, Data: d})
}

// filterText is a subscription's filter as "key=v1,v2 key2=v3", or "every
// message".
func filterText(f *service.TopicFilter) string {
	if f == nil || len(f.Tags) == 0 {
		return "every message"
	}
	keys := make([]string, 0, len(f.Tags))
	for k := range f.Tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strings.Join(f.Tags[k], ",")
	}
	return strings.Join(parts, " ")
}
