package console

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/skipq/skipq/internal/service"
)

// pageNames are the templates/*.html files that are pages (each parsed with
// layout.html); fragments are templates defined inside them.
var pageNames = []string{"login", "error", "queues", "queue", "message", "dlq", "search", "rates", "redrive", "topics", "topic"}

func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{
		"queueURL":   queueURL,
		"topicURL":   topicURL,
		"messageURL": messageURL,
		"when":       when,
		"ago":        ago,
		"count":      count,
		"rate":       rate,
		"deref":      func(s *string) string { return derefOr(s, "") },
		"preview":    preview,
		"ptr":        func(t time.Time) *time.Time { return &t },
	}
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		out[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(files,
			"templates/layout.html", "templates/"+name+".html"))
	}
	return out
}

func staticHash() string {
	h := sha256.New()
	err := fs.WalkDir(files, "static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(path)
		h.Write(b)
		return err
	})
	if err != nil {
		panic(err)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// view is what every page template gets.
type view struct {
	Title   string
	Nav     string // which menu entry is current
	ID      identity
	AuthOff bool
	CSRF    string
	Static  string // the static files' content tag
	Flash   string
	Data    any
}

// render writes a page (the whole layout) or, with fragment set, one
// template of it.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page string, id identity, data any) {
	c.renderView(w, r, status, page, "layout", view{ID: id, Data: data})
}

func (c *Console) renderView(w http.ResponseWriter, r *http.Request, status int, page, tmpl string, v view) {
	v.AuthOff = c.cfg.AuthOff
	v.CSRF = csrfToken(w, r)
	v.Static = c.staticTag
	if tmpl == "layout" {
		v.Flash = c.takeNotice(w, r)
	}
	var buf bytes.Buffer
	if err := c.pages[page].ExecuteTemplate(&buf, tmpl, v); err != nil {
		c.cfg.Log.Error("console template failed", "page", page, "template", tmpl, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

type errorData struct {
	Message string
	Issues  []service.Issue
}

// fail shows an error page with status.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, id identity, status int, msg string, issues ...service.Issue) {
	c.renderView(w, r, status, "error", "layout", view{Title: http.StatusText(status), ID: id,
		Data: errorData{Message: msg, Issues: issues}})
}

// serviceError shows a service error with the status the API gives it.
func (c *Console) serviceError(w http.ResponseWriter, r *http.Request, id identity, err error) {
	var se *service.Error
	errors.As(err, &se)
	msg := "Internal error: see the node's log."
	if se != nil && se.Kind != service.KindInternal {
		msg = se.Message
	}
	status := http.StatusInternalServerError
	switch service.KindOf(err) {
	case service.KindInvalid:
		status = http.StatusBadRequest
	case service.KindNotFound, service.KindReceiptStale:
		status = http.StatusNotFound
	case service.KindIdempotencyConflict, service.KindNotDeadLettered:
		status = http.StatusConflict
	case service.KindTooLarge:
		status = http.StatusRequestEntityTooLarge
	case service.KindTooManyRequests:
		status = http.StatusTooManyRequests
	case service.KindUnavailable:
		status = http.StatusServiceUnavailable
		msg = "The database is unavailable; try again in a moment."
		w.Header().Set("Retry-After", "1")
	default:
		c.cfg.Log.Error("console request failed", "path", r.URL.Path, "error", err)
	}
	var issues []service.Issue
	if se != nil {
		issues = se.Issues
	}
	c.fail(w, r, id, status, msg, issues...)
}

func queueURL(name string) string { return "/console/queues/" + url.PathEscape(name) }

func topicURL(name string) string { return "/console/topics/" + url.PathEscape(name) }

func messageURL(queue, id string) string {
	return queueURL(queue) + "/messages/" + url.PathEscape(id)
}

// when is a timestamp as the API writes it, or "—".
func when(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// ago is how long ago t was, to the second.
func ago(t *time.Time) string {
	if t == nil {
		return "—"
	}
	d := max(0, time.Since(*t)).Round(time.Second)
	return d.String()
}

// count is a snapshot count, or "—" when there is none yet.
func count(n *int64) string {
	if n == nil {
		return "—"
	}
	return strconv.FormatInt(*n, 10)
}

// rate is a per-second rate, or "—" while the first one is measured (a
// 0.0 would say nothing happened).
func rate(measuring bool, perSecond float64) string {
	if measuring {
		return "—"
	}
	return strconv.FormatFloat(perSecond, 'f', 1, 64)
}

func derefOr(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}

// intField reads an optional integer form field: absent or blank is nil.
func intField(r *http.Request, name string, is *[]service.Issue) *int {
	raw := r.PostFormValue(name)
	if raw == "" {
		return nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil {
		*is = append(*is, service.Issue{Path: name, Message: fmt.Sprintf("%q is not a whole number", raw)})
		return nil
	}
	return &n
}
