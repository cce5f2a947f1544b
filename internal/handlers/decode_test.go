package handlers

import (
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/wire"
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

// A batch's messages decode into slices the next batches reuse: a message
// of a later batch has only its own fields, whatever an earlier one in its
// place had.
func TestBatchMessagesReusedEmpty(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	decodeBatch := func(body string) *batchRequest {
		c, _ := gin.CreateTestContext(httptest.NewRecorder())
		c.Request = httptest.NewRequest(http.MethodPost, "/v1/queues/q/messages/batch", strings.NewReader(body))
		c.Request.Header.Set("Content-Type", "application/json")
		var req batchRequest
		if !decode(c, &req) {
			t.Fatalf("%s: not decoded", body)
		}
		return &req
	}
	full := `{"body":"a","bodyEncoding":"text","metadata":"m","tags":{"k":"v"},"clientId":"c","messageId":"i",` +
		`"delaySeconds":1,"expirationSeconds":2,"maxReceiveCount":3,"deadLetterQueue":"d","groupId":"g"}`
	for range 3 {
		first := decodeBatch(`{"messages":[` + full + `,` + full + `,` + full + `]}`)
		if len(first.Messages.msgs) != 3 || first.Messages.msgs[2].GroupID != "g" || first.Messages.msgs[2].Tags["k"] != "v" {
			t.Fatalf("first batch decoded %+v", first.Messages.msgs)
		}
		first.Messages.release()
		if first.Messages.msgs != nil {
			t.Fatal("a released batch still holds its messages")
		}
		second := decodeBatch(`{"messages":[{"body":"x"},{"body":"y"}]}`)
		if want := []wire.SendRequest{{Body: "x"}, {Body: "y"}}; !reflect.DeepEqual(second.Messages.msgs, want) {
			t.Fatalf("second batch decoded %+v, want %+v", second.Messages.msgs, want)
		}
		second.Messages.release()
	}
}
