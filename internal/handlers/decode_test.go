package handlers

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

// decode streams the body into the request struct: the same answers as
// reading it whole first, for bodies that are empty, malformed, followed by
// more data, or over the size limit.
func TestDecodeStreaming(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	type req struct {
		MaxMessages *int `json:"maxMessages"`
	}
	for _, c := range []struct {
		name, body, contentType string
		limit                   int64
		status                  int
		code                    string
	}{
		{"empty", "", "", 100, 0, ""},
		{"whitespace", " \r\n\t ", "", 100, 0, ""},
		{"value", ` {"maxMessages": 3} `, "application/json", 100, 0, ""},
		{"no media type", `{"maxMessages": 3}`, "text/plain", 100, http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{"trailing data", `{"maxMessages": 3} {}`, "application/json", 100, http.StatusBadRequest, "invalid_request"},
		{"truncated", `{"maxMessages": `, "application/json", 100, http.StatusBadRequest, "invalid_request"},
		{"unknown field", `{"max": 1}`, "application/json", 100, http.StatusBadRequest, "invalid_request"},
		{"duplicate field", `{"maxMessages": 1, "maxMessages": 2}`, "application/json", 100, http.StatusBadRequest, "invalid_request"},
		{"over the limit", `{"maxMessages": 3, "pad": "` + strings.Repeat("x", 200) + `"}`, "application/json", 100,
			http.StatusRequestEntityTooLarge, "payload_too_large"},
		{"over the limit in whitespace", strings.Repeat(" ", 200), "", 100, http.StatusRequestEntityTooLarge, "payload_too_large"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			ctx, _ := gin.CreateTestContext(rec)
			// No Content-Length: the limit is found while reading, as
			// for a chunked request.
			body := io.NopCloser(strings.NewReader(c.body))
			ctx.Request = httptest.NewRequest("POST", "/", body)
			ctx.Request.ContentLength = -1
			ctx.Request.Body = http.MaxBytesReader(rec, body, c.limit)
			if c.contentType != "" {
				ctx.Request.Header.Set("Content-Type", c.contentType)
			}
			var v req
			ok := decode(ctx, &v)
			if c.status == 0 {
				if !ok {
					t.Fatalf("refused: %d %s", rec.Code, rec.Body)
				}
				if c.name == "value" && (v.MaxMessages == nil || *v.MaxMessages != 3) {
					t.Fatalf("decoded %+v", v)
				}
				return
			}
			if ok || rec.Code != c.status || !strings.Contains(rec.Body.String(), `"code":"`+c.code+`"`) {
				t.Fatalf("ok=%v, %d %s; want %d %s", ok, rec.Code, rec.Body, c.status, c.code)
			}
		})
	}
}
