package console

import (
	"encoding/base64"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/worker"
)

// pageSize is how many rows a console list shows per page.
const pageSize = 50

// chartSpan is what the depth charts cover.
const chartSpan = time.Hour

type queuesData struct {
	Prefix, Cursor, Next string
	// PollURL is the table's own URL, for its 5 s refresh.
	PollURL   string
	Rows      []service.QueueGauge
	CountedAt *time.Time
	// Recount is how often the cluster recounts the snapshot; the queues
	// of fewer than CountedNow messages are counted at request time.
	Recount    time.Duration
	CountedNow int
	Chart      chart
}

// queues reads one page of the queue table: one query on the queues and the
// gauge snapshot, one that counts the small queues.
func (c *Console) queues(r *http.Request, id identity) (queuesData, error) {
	q := r.URL.Query()
	d := queuesData{Prefix: q.Get("prefix"), Cursor: q.Get("cursor"), Recount: worker.QueueCountsPeriod,
		CountedNow: service.ConsoleCountedNow}
	d.PollURL = "/console/queue-rows?" + url.Values{"prefix": {d.Prefix}, "cursor": {d.Cursor}}.Encode()
	rows, next, err := c.svc.QueueGauges(r.Context(), id.Tenant, d.Prefix, pageSize, d.Cursor)
	if err != nil {
		return d, err
	}
	d.Rows, d.Next = rows, next
	for _, g := range rows {
		if g.CountedAt != nil && (d.CountedAt == nil || g.CountedAt.After(*d.CountedAt)) {
			d.CountedAt = g.CountedAt
		}
	}
	return d, nil
}

func (c *Console) queuesPage(w http.ResponseWriter, r *http.Request, id identity) {
	d, err := c.queues(r, id)
	if err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	points, err := c.svc.DepthHistory(r.Context(), id.Tenant, "", chartSpan)
	if err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	d.Chart = newChart(points)
	c.renderView(w, r, http.StatusOK, "queues", "layout", view{Title: "Queues", Nav: "queues", ID: id, Data: d})
}

// queueRows is the queue table alone, which the queues page polls every 5 s.
func (c *Console) queueRows(w http.ResponseWriter, r *http.Request, id identity) {
	d, err := c.queues(r, id)
	if err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	c.renderView(w, r, http.StatusOK, "queues", "rows", view{ID: id, Data: d})
}

var browseStates = []string{service.StateAvailable, service.StateDelayed, service.StateInFlight, service.StateAcked}

type queueData struct {
	Queue          service.Queue
	Total          int64
	DeadLettered   int64
	DeadLetteredAt *time.Time
	State, Cursor  string
	Next           string
	States         []string
	Messages       []service.BrowsedMessage
	Chart          chart
}

func (c *Console) queuePage(w http.ResponseWriter, r *http.Request, id identity) {
	name := r.PathValue("queue")
	ctx := r.Context()
	q, err := c.svc.GetQueue(ctx, id.Tenant, name)
	if err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	d := queueData{Queue: q, States: browseStates, State: r.URL.Query().Get("state"), Cursor: r.URL.Query().Get("cursor")}
	if !slices.Contains(browseStates, d.State) {
		d.State = service.StateAvailable
	}
	d.Total = q.Stats.Available + q.Stats.Delayed + q.Stats.InFlight
	n, at, ok, err := c.svc.DeadLetteredGauge(ctx, id.Tenant, name)
	if err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	if ok {
		d.DeadLettered, d.DeadLetteredAt = n, &at
	}
	d.Messages, d.Next, err = c.svc.BrowseMessages(ctx, id.Tenant, name, d.State, pageSize, d.Cursor)
	if err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	points, err := c.svc.DepthHistory(ctx, id.Tenant, name, chartSpan)
	if err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	d.Chart = newChart(points)
	c.renderView(w, r, http.StatusOK, "queue", "layout", view{Title: name, Nav: "queues", ID: id, Data: d})
}

func (c *Console) saveSettings(w http.ResponseWriter, r *http.Request, id identity) {
	name := r.PathValue("queue")
	var is []service.Issue
	in := service.QueueSettings{
		VisibilitySeconds:  intField(r, "visibilitySeconds", &is),
		ReceiveWaitSeconds: intField(r, "receiveWaitSeconds", &is),
		DelaySeconds:       intField(r, "delaySeconds", &is),
		ExpirationSeconds:  intField(r, "expirationSeconds", &is),
		MaxReceiveCount:    intField(r, "maxReceiveCount", &is),
		DedupWindowSeconds: intField(r, "dedupWindowSeconds", &is),
		RetainAckedSeconds: intField(r, "retainAckedSeconds", &is),
	}
	// The form always holds the checkbox: unchecked, it sends nothing.
	trace := r.PostFormValue("trace") == "true"
	in.Trace = &trace
	dlq := strings.TrimSpace(r.PostFormValue("deadLetterQueue"))
	in.DeadLetterQueue = &dlq
	if len(is) > 0 {
		c.fail(w, r, id, http.StatusBadRequest, "The settings are invalid.", is...)
		return
	}
	// Settings are changed, never created here: a queue deleted meanwhile
	// stays deleted.
	if _, err := c.svc.GetQueue(r.Context(), id.Tenant, name); err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	if _, _, err := c.svc.PutQueue(r.Context(), id.Tenant, name, in); err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	c.redirect(w, r, queueURL(name), "Settings saved.")
}

func (c *Console) sendMessage(w http.ResponseWriter, r *http.Request, id identity) {
	name := r.PathValue("queue")
	var is []service.Issue
	in := service.MessageInput{
		Body:         r.PostFormValue("body"),
		BodyEncoding: r.PostFormValue("bodyEncoding"),
		Metadata:     r.PostFormValue("metadata"),
		DelaySeconds: intField(r, "delaySeconds", &is),
	}
	if len(is) > 0 {
		c.fail(w, r, id, http.StatusBadRequest, "The message is invalid.", is...)
		return
	}
	res, err := c.svc.Send(r.Context(), id.Tenant, name, in)
	if err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	c.redirect(w, r, queueURL(name), "Sent message "+res.MessageID+".")
}

// confirmed: a destructive form carries the queue's name typed in.
func (c *Console) confirmed(w http.ResponseWriter, r *http.Request, id identity, what string) bool {
	name := r.PathValue("queue")
	if r.PostFormValue("confirm") != name {
		c.fail(w, r, id, http.StatusBadRequest, fmt.Sprintf("To %s, type the queue's name (%s) into the box.", what, name),
			service.Issue{Path: "confirm", Message: "must be the queue's name"})
		return false
	}
	return true
}

func (c *Console) purgeQueue(w http.ResponseWriter, r *http.Request, id identity) {
	if !c.confirmed(w, r, id, "purge the queue") {
		return
	}
	name := r.PathValue("queue")
	n, err := c.svc.PurgeQueue(r.Context(), id.Tenant, name)
	if err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	c.redirect(w, r, queueURL(name), fmt.Sprintf("Purged %d messages.", n))
}

func (c *Console) deleteQueue(w http.ResponseWriter, r *http.Request, id identity) {
	if !c.confirmed(w, r, id, "delete the queue") {
		return
	}
	name := r.PathValue("queue")
	if err := c.svc.DeleteQueue(r.Context(), id.Tenant, name); err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	c.redirect(w, r, "/console/", "Deleted queue "+name+".")
}

type messageData struct {
	Message    service.BrowsedMessage
	Text       bool   // the body is shown as text
	Body       string // as text, or base64
	Size       int
	Tags       []tag
	DeadLetter bool
	// History is its traced life (docs/API.md#history), oldest first; empty when
	// its queue did not trace it.
	History []service.HistoryEvent
}

type tag struct{ Key, Value string }

func (c *Console) messagePage(w http.ResponseWriter, r *http.Request, id identity) {
	m, err := c.svc.GetMessage(r.Context(), id.Tenant, r.PathValue("queue"), r.PathValue("id"))
	if err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	d := messageData{Message: m, Size: len(m.Body), DeadLetter: m.DeadLetteredAt != nil}
	if !m.BodyBinary && utf8.Valid(m.Body) {
		d.Text, d.Body = true, string(m.Body)
	} else {
		d.Body = base64.StdEncoding.EncodeToString(m.Body)
	}
	for k, v := range m.Tags {
		d.Tags = append(d.Tags, tag{k, v})
	}
	slices.SortFunc(d.Tags, func(a, b tag) int { return strings.Compare(a.Key, b.Key) })
	if d.History, err = c.svc.MessageHistory(r.Context(), id.Tenant, m.Queue, m.MessageID); err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	c.renderView(w, r, http.StatusOK, "message", "layout", view{Title: m.MessageID, Nav: "queues", ID: id, Data: d})
}

func (c *Console) deleteMessage(w http.ResponseWriter, r *http.Request, id identity) {
	name := r.PathValue("queue")
	if err := c.svc.DeleteMessage(r.Context(), id.Tenant, name, r.PathValue("id")); err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	c.redirect(w, r, queueURL(name), "Deleted message "+r.PathValue("id")+".")
}

func (c *Console) redriveMessage(w http.ResponseWriter, r *http.Request, id identity) {
	to := strings.TrimSpace(r.PostFormValue("toQueue"))
	res, err := c.svc.Redrive(r.Context(), id.Tenant, r.PathValue("queue"), r.PathValue("id"), to)
	if err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	back := "/console/dlq"
	if r.PostFormValue("back") == "queue" {
		back = queueURL(r.PathValue("queue"))
	}
	c.redirect(w, r, back, fmt.Sprintf("Redrove the message to %s as %s.", res.Queue, res.MessageID))
}

// redriveStep is how many messages one redrive-all request moves: the page
// posts again (htmx) while some remain, showing the progress.
const redriveStep = 1000

type redriveData struct {
	Queue, ToQueue   string
	Moved, Remaining int64
}

func (c *Console) redriveAll(w http.ResponseWriter, r *http.Request, id identity) {
	name := r.PathValue("queue")
	d := redriveData{Queue: name, ToQueue: strings.TrimSpace(r.PostFormValue("toQueue"))}
	before, _ := strconv.ParseInt(r.PostFormValue("moved"), 10, 64)
	moved, remaining, err := c.svc.RedriveQueue(r.Context(), id.Tenant, name, d.ToQueue, redriveStep)
	if err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	d.Moved, d.Remaining = max(0, before)+moved, remaining
	v := view{Title: "Redrive " + name, Nav: "dlq", ID: id, Data: d}
	if r.Header.Get("HX-Request") == "true" {
		c.renderView(w, r, http.StatusOK, "redrive", "progress", v)
		return
	}
	c.renderView(w, r, http.StatusOK, "redrive", "layout", v)
}

type dlqData struct {
	SourceQueue, Cursor, Next string
	Messages                  []service.Message
	// Queues are the dead-letter queues the listed messages sit in.
	Queues []string
}

func (c *Console) deadLettersPage(w http.ResponseWriter, r *http.Request, id identity) {
	q := r.URL.Query()
	d := dlqData{SourceQueue: strings.TrimSpace(q.Get("sourceQueue")), Cursor: q.Get("cursor")}
	var err error
	d.Messages, d.Next, err = c.svc.ListDeadLettered(r.Context(), id.Tenant, service.DeadLetteredFilter{SourceQueue: d.SourceQueue}, pageSize, d.Cursor)
	if err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	for _, m := range d.Messages {
		if !slices.Contains(d.Queues, m.Queue) {
			d.Queues = append(d.Queues, m.Queue)
		}
	}
	slices.Sort(d.Queues)
	c.renderView(w, r, http.StatusOK, "dlq", "layout", view{Title: "Dead letters", Nav: "dlq", ID: id, Data: d})
}

type searchData struct {
	QueuePrefix, State, MessageID, Tag, Cursor, Next string
	States                                           []string
	Messages                                         []service.BrowsedMessage
	// Query is the filters as a query string, for the next page's link
	// (encoded here: the template would escape its & and =).
	Query template.URL
}

// searchPage finds messages across the tenant's queues (docs/API.md#search): a
// queue prefix, a state, a messageId and one tag, newest first.
func (c *Console) searchPage(w http.ResponseWriter, r *http.Request, id identity) {
	q := r.URL.Query()
	d := searchData{QueuePrefix: strings.TrimSpace(q.Get("queuePrefix")), State: q.Get("state"),
		MessageID: strings.TrimSpace(q.Get("messageId")), Tag: strings.TrimSpace(q.Get("tag")), Cursor: q.Get("cursor"),
		States: []string{service.StateAvailable, service.StateDelayed, service.StateInFlight,
			service.StateDeadLettered, service.StateAcked}}
	d.Query = template.URL(url.Values{"queuePrefix": {d.QueuePrefix}, "state": {d.State}, "messageId": {d.MessageID}, "tag": {d.Tag}}.Encode()) //nolint:gosec // url.Values.Encode escapes every value
	o := service.SearchOptions{QueuePrefix: d.QueuePrefix, MessageID: d.MessageID, Limit: pageSize, Cursor: d.Cursor}
	if d.State != "" {
		o.States = []string{d.State}
	}
	if d.Tag != "" {
		k, v, ok := strings.Cut(d.Tag, ":")
		if !ok {
			c.fail(w, r, id, http.StatusBadRequest, "A tag filter is key:value.")
			return
		}
		o.Tags = map[string]string{k: v}
	}
	var err error
	if d.Messages, d.Next, err = c.svc.SearchMessages(r.Context(), id.Tenant, o); err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	c.renderView(w, r, http.StatusOK, "search", "layout", view{Title: "Search", Nav: "search", ID: id, Data: d})
}

// preview is the start of a body for a list: text as is, binary as its size.
func preview(m service.Message) string {
	if m.BodyBinary || !utf8.Valid(m.Body) {
		return fmt.Sprintf("(%d bytes of binary)", len(m.Body))
	}
	s := string(m.Body)
	if utf8.RuneCountInString(s) > 80 {
		s = string([]rune(s)[:80]) + "…"
	}
	return s
}
