package handlers

import (
	"net/http"
	"net/url"
	"slices"
	"sort"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/internal/service"
)

// routeQuery lists the query parameters each /v1 route takes, by method and
// route path; a route not listed takes none. A name ending in "..." may be
// repeated.
var routeQuery = map[string][]string{
	http.MethodGet + " /v1/queues":                 {"prefix", "limit", "cursor"},
	http.MethodGet + " /v1/queues/:queue/messages": {"state", "limit", "cursor"},
	http.MethodGet + " /v1/dlq":                    {"sourceQueue", "cause", "limit", "cursor"},
	http.MethodGet + " /v1/topics":                 {"limit", "cursor"},
	http.MethodGet + " /v1/messages": {"queue...", "queuePrefix", "state...", "sentAfter", "sentBefore",
		"tag...", "messageId", "groupId", "limit", "cursor"},
}

// strictQuery refuses query parameters as decode refuses body fields
// (docs/API.md#conventions): one the route does not take, or one given twice, is a 400
// invalid_request with the parameter's name as the issue's path; every such
// parameter is reported, in name order. A mistyped filter
// (GET /v1/dlq?queue=x) would otherwise be ignored and answer everything.
func strictQuery(c *gin.Context) {
	if c.Request.URL.RawQuery == "" {
		return
	}
	values, err := url.ParseQuery(c.Request.URL.RawQuery)
	if err != nil {
		fail(c, service.Invalid(service.Issue{Message: "the query string is malformed: " + err.Error()}))
		return
	}
	allowed := routeQuery[c.Request.Method+" "+c.FullPath()]
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	sort.Strings(names)
	var issues []service.Issue
	for _, name := range names {
		switch {
		case slices.Contains(allowed, name+"..."):
		case !slices.Contains(allowed, name):
			issues = append(issues, service.Issue{Path: name, Message: "is not a parameter of this route"})
		case len(values[name]) > 1:
			issues = append(issues, service.Issue{Path: name, Message: "must be given at most once"})
		}
	}
	if len(issues) > 0 {
		fail(c, service.Invalid(issues...))
	}
}
