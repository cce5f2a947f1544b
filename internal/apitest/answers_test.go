package apitest

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/skipq/skipq/internal/node"
)

// The rough edges of the answers a newcomer met with curl: every JSON
// answer ends with a newline, `<` stays `<`, an issue without a path has
// no stray ": ", a GET of a POST route says so, and the role error names
// the role the route needs.
func TestAnswersReadWellInATerminal(t *testing.T) {
	n := newNode(t, func(c *node.Config) { c.Auth = "required" })
	_, reader := createKey(t, newPool(t, n.DB), "acme", "read")
	_, writer := createKey(t, newPool(t, n.DB), "acme", "write")
	as := func(secret string) []string { return []string{"Authorization", "Bearer " + secret} }

	sent := n.do(t, "POST", "/v1/queues/q/messages", map[string]any{"body": "x"}, as(writer)...)
	if sent.Status != http.StatusCreated || !bytes.HasSuffix(sent.Raw, []byte("}\n")) {
		t.Errorf("a send's answer: %d %q, want 201 ending in a newline", sent.Status, sent.Raw)
	}
	page := n.do(t, "GET", "/v1/queues/q/messages", nil, as(reader)...)
	if page.Status != http.StatusOK || !bytes.HasSuffix(page.Raw, []byte("}\n")) {
		t.Errorf("a browsed page: %d %q, want 200 ending in a newline", page.Status, page.Raw)
	}

	bad := n.do(t, "POST", "/v1/queues/q/messages", map[string]any{"body": "x", "tags": map[string]string{"<b>": "1"}}, as(writer)...)
	wantError(t, bad, http.StatusBadRequest, "invalid_request", "tags.<b>")
	if !bytes.Contains(bad.Raw, []byte("<b>")) || bytes.Contains(bad.Raw, []byte(`\u003c`)) || !bytes.HasSuffix(bad.Raw, []byte("\n")) {
		t.Errorf("an error naming <b>: %q, want < unescaped and a final newline", bad.Raw)
	}

	malformed := n.do(t, "POST", "/v1/queues/q/messages", "{", as(writer)...)
	wantError(t, malformed, http.StatusBadRequest, "invalid_request")
	if msg := malformed.Body["error"].(map[string]any)["message"].(string); strings.HasPrefix(msg, ":") || strings.HasPrefix(msg, " ") {
		t.Errorf("malformed JSON: message %q starts with the separator of an empty path", msg)
	}

	for _, route := range []string{"receive", "batch"} {
		r := n.do(t, "GET", "/v1/queues/q/messages/"+route, nil, as(reader)...)
		wantError(t, r, http.StatusNotFound, "not_found")
		if msg := r.Body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "POST /v1/queues/{queue}/messages/"+route) {
			t.Errorf("GET …/messages/%s: %q, want it to name the POST route", route, msg)
		}
	}

	denied := n.do(t, "POST", "/v1/queues/q/messages", map[string]any{"body": "x"}, as(reader)...)
	wantError(t, denied, http.StatusForbidden, "access_denied")
	if msg := denied.Body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "role write") || !strings.Contains(msg, "is read") {
		t.Errorf("a read key sending: %q, want the role the route needs and the key's", msg)
	}
}
