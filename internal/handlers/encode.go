package handlers

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"
	"unsafe"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/wire"
)

// The service's results in the API's shapes (package wire).

func toQueue(q service.Queue) wire.Queue {
	out := wire.Queue{
		Name: q.Name, CreatedAt: wire.At(q.CreatedAt),
		VisibilitySeconds: q.VisibilitySeconds, ReceiveWaitSeconds: q.ReceiveWaitSeconds,
		DelaySeconds: q.DelaySeconds, ExpirationSeconds: q.ExpirationSeconds,
		MaxReceiveCount: q.MaxReceiveCount, DeadLetterQueue: q.DeadLetterQueue,
		DedupWindowSeconds: q.DedupWindowSeconds, FIFO: q.FIFO,
		ContentBasedDeduplication: q.ContentBasedDeduplication, RetainAckedSeconds: q.RetainAckedSeconds,
		Trace: q.Trace,
	}
	if st := q.Stats; st != nil {
		out.Stats = &wire.QueueStats{
			Available: st.Available, Delayed: st.Delayed, InFlight: st.InFlight,
			Total: st.Available + st.Delayed + st.InFlight, Acked: st.Acked, Groups: st.Groups,
			OldestAvailableAt: wire.AtPtr(st.OldestAvailableAt),
		}
	}
	return out
}

// timeOnWire is *t as the wire writes it, without wire.AtPtr's copy: a
// wire.Time is a struct of one time.Time, so the two have one layout and
// the answer reads the service's time where it is (nil stays nil). The
// service's results are not written to once answered. A receive's
// messages and a batch send's results carry two or three times each, and
// their copies were half of the allocations of a receive's answer
// (BenchmarkReceivePage).
func timeOnWire(t *time.Time) *wire.Time { return (*wire.Time)(unsafe.Pointer(t)) }

// The conversion compiles only while a wire.Time is a struct of one
// time.Time and nothing else: timeOnWire's cast relies on that layout.
var _ = wire.Time(struct{ time.Time }{})

func toSendResult(r service.SendResult) wire.SendResult {
	return wire.SendResult{
		MessageID: r.MessageID, Sequence: r.Sequence, SentAt: wire.At(r.SentAt),
		DelayedTo: timeOnWire(r.DelayedTo), ExpiresAt: timeOnWire(r.ExpiresAt), Duplicate: r.Duplicate,
	}
}

func toMessage(m service.Message) wire.Message {
	out := wire.Message{
		MessageID: m.MessageID, Queue: m.Queue, Sequence: m.Sequence,
		ClientID: m.ClientID, Metadata: m.Metadata, Tags: m.Tags,
		SentAt: wire.At(m.SentAt), FirstReceivedAt: timeOnWire(m.FirstReceivedAt),
		ReceiveCount: m.ReceiveCount, VisibleUntil: timeOnWire(m.VisibleUntil),
		DelayedTo: timeOnWire(m.DelayedTo), ExpiresAt: timeOnWire(m.ExpiresAt),
		ReRoutedFrom: m.ReRoutedFrom, DeadLetteredAt: timeOnWire(m.DeadLetteredAt), GroupID: m.GroupID,
		AckedAt: timeOnWire(m.AckedAt),
	}
	if m.ReceiptHandle != "" {
		// A copy of the handle alone: a pointer into m would move all of m
		// to the heap, a message's worth of bytes for each of a page's.
		handle := m.ReceiptHandle
		out.ReceiptHandle = &handle
	}
	if f := m.LastFailure; f != nil {
		out.LastFailure = &wire.Failure{Cause: f.Cause, Reason: f.Reason, At: wire.At(f.At), ReceiveCount: f.ReceiveCount}
	}
	if d := m.DeadLetter; d != nil {
		out.DeadLetter = &wire.DeadLetter{Cause: d.Cause, Reason: d.Reason, ReceiveCount: d.ReceiveCount,
			SourceQueue: d.SourceQueue, At: wire.At(d.At)}
	}
	if m.SQS != nil && len(m.SQS.Attributes) > 0 {
		out.MessageAttributes = make(map[string]wire.MessageAttribute, len(m.SQS.Attributes))
		for k, a := range m.SQS.Attributes {
			out.MessageAttributes[k] = wire.MessageAttribute{DataType: a.DataType, StringValue: a.StringValue, BinaryValue: a.BinaryValue}
		}
	}
	if out.Tags == nil {
		out.Tags = map[string]string{}
	}
	if m.BodyBinary {
		out.Body, out.BodyEncoding = base64.StdEncoding.EncodeToString(m.Body), wire.EncodingBase64
	} else {
		// A text body is not copied on its way out: the string shares the
		// scanned row's bytes, which nothing modifies afterwards.
		out.Body, out.BodyEncoding = unsafe.String(unsafe.SliceData(m.Body), len(m.Body)), wire.EncodingText
	}
	return out
}

func toBrowsed(m service.BrowsedMessage) wire.Message {
	out := toMessage(m.Message)
	out.State, out.VisibleAt = wire.State(m.State), wire.AtPtr(m.VisibleAt)
	return out
}

// writeMessages answers 200 {"messages": [...]} (a receive).
func writeMessages(c *gin.Context, msgs []service.Message) {
	writeMessagesThen(c, msgs, "")
}

// writeMessagesThen is writeMessages with more fields after the messages:
// tail is their JSON (`"name":value,…`), or "" for none.
func writeMessagesThen(c *gin.Context, msgs []service.Message, tail string) {
	writeObject(c, len(msgs), func(i int) wire.Message {
		m := toMessage(msgs[i])
		msgs[i] = service.Message{} // m holds the body until it is written
		return m
	}, tail)
}

// writePage answers 200 with a wire.MessagePage, encoding one message at a
// time straight into the response: an answer of up to
// SKIPQ_MAX_RESPONSE_BYTES and more is never built whole in memory. item
// returns message i's wire form and should let go of the message, so its
// body can be collected once written while the rest is still being sent.
// A write error means the client left; there is no one to tell.
func writePage(c *gin.Context, n int, item func(i int) wire.Message, next string) {
	tail := ""
	if next != "" {
		cursor, _ := json.Marshal(next) // a string always marshals
		tail = `"nextCursor":` + string(cursor)
	}
	writeObject(c, n, item, tail)
}

// pageBufferBytes is how much of a page writeObject gathers before it
// hands it to net/http. A body of unknown length goes out in chunks of
// what net/http's own 2 KiB buffer held, each a write to the socket once
// the connection's 4 KiB buffer is full: a receive of 100 messages (about
// 70 KB) took some 17 writes, now 3, and as many fewer chunk headers.
const pageBufferBytes = 32 << 10

var pageBuffers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, pageBufferBytes) }}

// writeObject is writePage's answer with tail (`"name":value,…`, or "")
// after the messages.
func writeObject(c *gin.Context, n int, item func(i int) wire.Message, tail string) {
	c.Header("Content-Type", jsonContentType)
	c.Status(http.StatusOK)
	w := pageBuffers.Get().(*bufio.Writer)
	w.Reset(c.Writer)
	defer func() {
		_ = w.Flush() // an error means the client left
		w.Reset(nil)
		pageBuffers.Put(w)
	}()
	if _, err := io.WriteString(w, `{"messages":[`); err != nil {
		return
	}
	// Each message is appended to one scratch buffer for the page
	// (wire.Message.AppendJSON: encoding/json's bytes, HTML not escaped --
	// bodies are JSON strings, not HTML -- and its newline after each).
	var m wire.Message // one variable for every message: one allocation for the page, not one per message
	var scratch []byte
	for i := range n {
		scratch = scratch[:0]
		if i > 0 {
			scratch = append(scratch, ',')
		}
		m = item(i)
		scratch = append(m.AppendJSON(scratch), '\n')
		if _, err := w.Write(scratch); err != nil {
			return
		}
	}
	end := "]}\n"
	if tail != "" {
		end = "]," + tail + "}\n"
	}
	_, _ = io.WriteString(w, end)
}

// answerJSON answers v as JSON, as every route does: not escaped for HTML
// (an answer is not a page: `<` in an error message or a body stays `<`),
// and ending in a newline, so that a terminal's prompt does not follow a
// curl's answer on its line.
func answerJSON(c *gin.Context, status int, v any) {
	c.Render(status, plainJSON{v})
}

// plainJSON is gin's JSON render without HTML escaping, newline-terminated.
type plainJSON struct{ v any }

func (r plainJSON) Render(w http.ResponseWriter) error {
	r.WriteContentType(w)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(r.v)
}

func (plainJSON) WriteContentType(w http.ResponseWriter) {
	w.Header()["Content-Type"] = []string{jsonContentType}
}

// jsonContentType is every JSON answer's Content-Type.
const jsonContentType = "application/json; charset=utf-8"

func toHistoryEvent(e service.HistoryEvent) wire.HistoryEvent {
	return wire.HistoryEvent{
		Type: e.Type, At: wire.At(e.At), Queue: e.Queue, KeyID: e.KeyID, MessageID: e.MessageID,
		ReceiveCount: e.ReceiveCount, VisibleUntil: wire.AtPtr(e.VisibleUntil), Reason: e.Reason,
		Cause: e.Cause, ToQueue: e.ToQueue, NewMessageID: e.NewMessageID,
	}
}
