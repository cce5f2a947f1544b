package handlers

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/internal/service"
)

// BenchmarkReceivePage is the answer of a receive of 100 messages of 64
// bytes, over a real connection: the node's encoding and writing of it, and
// the client's reading.
func BenchmarkReceivePage(b *testing.B) {
	gin.SetMode(gin.ReleaseMode)
	now := time.Now()
	page := make([]service.Message, 100)
	for i := range page {
		page[i] = service.Message{MessageID: "0193a5c4-7f1e-7b3a-9c1d-5e6f7a8b9c0d", Queue: "bench.lifecycle", Sequence: int64(i),
			Body: []byte(strings.Repeat("x", 64)), Tags: map[string]string{}, SentAt: now, FirstReceivedAt: &now,
			ReceiveCount: 1, VisibleUntil: &now, ReceiptHandle: strings.Repeat("h", 64)}
	}
	msgs := make([]service.Message, len(page))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := gin.CreateTestContext(w)
		copy(msgs, page)
		writeMessages(c, msgs)
	}))
	defer srv.Close()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := http.Get(srv.URL)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		_ = resp.Body.Close()
	}
}

// The request of a batch send of 100 messages of 64 bytes, decoded.
func BenchmarkDecodeBatch(b *testing.B) {
	gin.SetMode(gin.ReleaseMode)
	msg := `{"body":"skipq-bench-payload-0123456789abcdefghijklmnopqrstuvwxyz-0123456"}`
	body := `{"messages":[` + strings.Repeat(msg+",", 99) + msg + `]}`
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		c, _ := gin.CreateTestContext(httptest.NewRecorder())
		c.Request = httptest.NewRequest(http.MethodPost, "/v1/queues/q/messages/batch", strings.NewReader(body))
		c.Request.Header.Set("Content-Type", "application/json")
		var req batchRequest
		if !decode(c, &req) || len(req.Messages.msgs) != 100 {
			b.Fatal("not decoded")
		}
		req.Messages.release() // as sendBatch does once it has its inputs
	}
}
