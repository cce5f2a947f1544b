package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// client speaks skipq's HTTP API with as little work per call as it can:
// request bodies are prebuilt bytes, responses decode only what is needed.
type client struct {
	hc  *http.Client
	key string
}

func newClient(apiKey string) *client {
	t := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 2048, // ≥ the idle scenario's waiters: every pair and waiter keeps its connection
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &client{hc: &http.Client{Transport: t}, key: apiKey}
}

func (c *client) close() { c.hc.CloseIdleConnections() }

// httpError is an unexpected answer.
type httpError struct {
	method, url string
	status      int
	body        string
}

func (e *httpError) Error() string {
	return fmt.Sprintf("%s %s: status %d: %s", e.method, e.url, e.status, e.body)
}

// do sends body and decodes a JSON answer into out (nil: discarded) when the
// status is want.
func (c *client) do(ctx context.Context, method, u string, body []byte, want int, out any) error {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != want {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return &httpError{method, u, resp.StatusCode, strings.TrimSpace(string(b))}
	}
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	// encoding/json/v2's decoder (go-json-experiment, as the node's): the
	// standard library's took a fifth of this process's CPU at batch 100,
	// decoding the handles and bodies a consumer uses. A name given twice
	// is the last one's, as encoding/json and the Go client have it.
	return jsonv2.UnmarshalRead(resp.Body, out, jsontext.AllowDuplicateNames(true))
}

func queuePath(base, queue string) string {
	return base + "/v1/queues/" + url.PathEscape(queue)
}

// createQueue creates (or updates) a queue with the given settings.
func (c *client) createQueue(ctx context.Context, base, queue string, settings string) error {
	if settings == "" {
		settings = "{}"
	}
	err := c.do(ctx, http.MethodPut, queuePath(base, queue), []byte(settings), http.StatusCreated, nil)
	if he, ok := err.(*httpError); ok && he.status == http.StatusOK {
		return nil
	}
	return err
}

// payload is every message's body: 64 bytes of text.
const payload = "skipq-bench-payload-0123456789abcdefghijklmnopqrstuvwxyz-0123456"

// sendBody is a prebuilt send request: one message, or a batch of n.
func sendBody(n int) []byte {
	if n == 1 {
		return []byte(`{"body":"` + payload + `"}`)
	}
	var b bytes.Buffer
	b.WriteString(`{"messages":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"body":"` + payload + `"}`)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// sender sends prebuilt batches to one queue on one node.
type sender struct {
	c    *client
	url  string
	body []byte
	n    int
}

func newSender(c *client, base, queue string, n int) *sender {
	u := queuePath(base, queue) + "/messages"
	if n > 1 {
		u += "/batch"
	}
	return &sender{c: c, url: u, body: sendBody(n), n: n}
}

func (s *sender) send(ctx context.Context) error {
	return s.c.do(ctx, http.MethodPost, s.url, s.body, http.StatusCreated, nil)
}

// receiver receives from one queue on one node and acks what it got.
type receiver struct {
	c      *client
	url    string
	ackURL string
	body   []byte // a receive: long-polls waitSeconds
	// ackBody is the start of a receive that carries acks, as the Go
	// client's consumer loop sends it: it answers at once (waitSeconds 0),
	// the acks' handles follow.
	ackBody []byte
	handles []string // scratch for the handles acked apart (AckSeparately)
	held    []string // what the last receive got, acked by the next one (AckWithNextReceive)
	// answer is the last answer AckWithNextReceive read, its list of
	// messages reused by the next: grown afresh each time, the list cost
	// more than the struct decoder's.
	answer receiveResponse
}

func newReceiver(c *client, base, queue string, max, waitSeconds int) *receiver {
	maxMessages := `{"maxMessages":` + strconv.Itoa(max)
	return &receiver{
		c: c, url: queuePath(base, queue) + "/messages/receive", ackURL: base + "/v1/receipts/ack",
		body:    []byte(maxMessages + `,"waitSeconds":` + strconv.Itoa(waitSeconds) + `}`),
		ackBody: []byte(maxMessages + `,"waitSeconds":0,"ack":`),
	}
}

type receiveResponse struct {
	Messages []receivedMessage `json:"messages"`
	Acked    *struct {
		Succeeded int `json:"succeeded"`
	} `json:"acked"`
}

// receivedMessage is what a consumer uses of a received message.
type receivedMessage struct {
	ReceiptHandle string `json:"receiptHandle"`
	Body          string `json:"body"`
}

// UnmarshalJSONFrom reads a receive's answer token by token, as the
// struct decoder would but without its per-member work: the node's answer
// carries some twenty members a message, all but two of which a consumer
// skips, and the struct decoder's look-up and skipping of each took a fifth
// of the bench process's CPU at batch 100 × 4. Every value is still read
// and validated (UTF-8, escapes, nesting) by the decoder; a name given
// twice is the last one's, as with encoding/json and the Go client (the
// decoder's own check of duplicate names was a fifth of the rest: the
// caller turns it off with jsontext.AllowDuplicateNames).
// TestReceiveResponseDecodes holds the result to the struct decoder's.
func (r *receiveResponse) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	if ok, err := openComposite(d, '{'); !ok || err != nil {
		return err
	}
	var scratch []byte
	for d.PeekKind() != '}' {
		name, err := readName(d, &scratch)
		if err != nil {
			return err
		}
		switch string(name) {
		case "messages":
			err = r.readMessages(d)
		case "acked":
			err = jsonv2.UnmarshalDecode(d, &r.Acked)
		default:
			err = d.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	_, err := d.ReadToken()
	return err
}

// readMessages reads the answer's list of messages.
func (r *receiveResponse) readMessages(d *jsontext.Decoder) error {
	ok, err := openComposite(d, '[')
	if !ok || err != nil {
		r.Messages = nil
		return err
	}
	r.Messages = r.Messages[:0]
	if r.Messages == nil {
		r.Messages = []receivedMessage{} // [] is an empty list, not null's nil
	}
	var scratch []byte
	for d.PeekKind() != ']' {
		r.Messages = append(r.Messages, receivedMessage{})
		m := &r.Messages[len(r.Messages)-1]
		if ok, err := openComposite(d, '{'); err != nil {
			return err
		} else if !ok {
			continue // null: a zero message, as the struct decoder leaves it
		}
		for d.PeekKind() != '}' {
			name, err := readName(d, &scratch)
			if err != nil {
				return err
			}
			switch string(name) {
			case "receiptHandle":
				err = readString(d, &m.ReceiptHandle)
			case "body":
				err = readString(d, &m.Body)
			default:
				err = d.SkipValue()
			}
			if err != nil {
				return err
			}
		}
		if _, err := d.ReadToken(); err != nil {
			return err
		}
	}
	_, err = d.ReadToken()
	return err
}

// openComposite reads the start of an object ('{') or an array ('[') and
// reports true, or a null and reports false; anything else is an error.
func openComposite(d *jsontext.Decoder, kind jsontext.Kind) (bool, error) {
	tok, err := d.ReadToken()
	switch {
	case err != nil:
		return false, err
	case tok.Kind() == 'n':
		return false, nil
	case tok.Kind() != kind:
		return false, fmt.Errorf("JSON %v expected, got %v", kind, tok.Kind())
	}
	return true, nil
}

// readName reads an object member's name: the decoder's own bytes when
// nothing in it is escaped, else unquoted into *scratch (never into the
// decoder's bytes, which a returned name may be). The result is valid
// until the decoder reads on.
func readName(d *jsontext.Decoder, scratch *[]byte) ([]byte, error) {
	v, err := d.ReadValue()
	if err != nil {
		return nil, err
	}
	if raw := v[1 : len(v)-1]; bytes.IndexByte(raw, '\\') < 0 {
		return raw, nil
	}
	*scratch, err = jsontext.AppendUnquote((*scratch)[:0], v)
	return *scratch, err
}

// readString reads a JSON string (null: s unchanged, as the struct decoder
// leaves it).
func readString(d *jsontext.Decoder, s *string) error {
	v, err := d.ReadValue()
	if err != nil {
		return err
	}
	switch v.Kind() {
	case 'n':
		return nil
	case '"':
	default:
		return fmt.Errorf("a JSON string expected, got %v", v.Kind())
	}
	if raw := v[1 : len(v)-1]; bytes.IndexByte(raw, '\\') < 0 {
		*s = string(raw) // nothing escaped: the text between the quotes
		return nil
	}
	b, err := jsontext.AppendUnquote(nil, v)
	*s = string(b)
	return err
}

// receive returns the receipt handles (and bodies) of what one receive got.
func (r *receiver) receive(ctx context.Context) (*receiveResponse, error) {
	var out receiveResponse
	if err := r.c.do(ctx, http.MethodPost, r.url, r.body, http.StatusOK, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ackTimeout bounds a request that carries acks. Like the Go client's
// consumer loop (its settleTimeout), the bench never abandons one when a
// run stops: its acks get their answer and are counted.
const ackTimeout = 30 * time.Second

// ackWithNextReceive is one turn of the Go client's consumer loop
// (client.Consume): a receive that carries the acks of what the previous
// one got and answers at once, or, holding nothing, a receive that
// long-polls. It holds what it got and returns how many messages it acked.
func (r *receiver) ackWithNextReceive(ctx context.Context) (int, error) {
	got := &r.answer
	got.Messages, got.Acked = got.Messages[:0], nil
	n := 0
	if len(r.held) == 0 {
		if err := r.c.do(ctx, http.MethodPost, r.url, r.body, http.StatusOK, got); err != nil {
			return 0, err
		}
	} else {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
		defer cancel()
		b := appendHandles(slices.Clip(r.ackBody), r.held)
		b = append(b, '}')
		if err := r.c.do(actx, http.MethodPost, r.url, b, http.StatusOK, got); err != nil {
			return 0, err
		}
		if got.Acked == nil {
			return 0, fmt.Errorf("a receive with ack answered no acked: %d messages", len(got.Messages))
		}
		if n = got.Acked.Succeeded; n != len(r.held) {
			return n, fmt.Errorf("ack settled %d of %d held receipt handles", n, len(r.held))
		}
	}
	r.held = r.held[:0]
	for _, m := range got.Messages {
		r.held = append(r.held, m.ReceiptHandle)
	}
	return n, nil
}

// appendHandles appends handles as a JSON array.
func appendHandles(b []byte, handles []string) []byte {
	b = append(b, '[')
	for i, h := range handles {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, h...) // base64url: nothing to escape
		b = append(b, '"')
	}
	return append(b, ']')
}

// ack settles handles: the single form for one, the list form for more.
// It returns how many were removed.
func (r *receiver) ack(ctx context.Context, handles []string) (int, error) {
	var b []byte
	if len(handles) == 1 {
		b = append(b, `{"receiptHandle":"`...)
		b = append(b, handles[0]...)
		b = append(b, `"}`...)
	} else {
		b = append(b, `{"receiptHandles":`...)
		b = appendHandles(b, handles)
		b = append(b, '}')
	}
	var out struct {
		Succeeded int `json:"succeeded"`
	}
	if err := r.c.do(ctx, http.MethodPost, r.ackURL, b, http.StatusOK, &out); err != nil {
		return 0, err
	}
	return out.Succeeded, nil
}

// waiters reads the node's skipq_longpoll_waiters gauge from /metrics.
func (c *client) waiters(ctx context.Context, base string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "skipq_longpoll_waiters "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(f), err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s/metrics has no skipq_longpoll_waiters", base)
}
