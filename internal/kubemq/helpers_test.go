// Package kubemq_test drives the KubeMQ endpoint of real nodes on a real
// PostgreSQL with a raw gRPC client generated from the project's proto
// (what KubeMQ's Go SDK sends), and with the Node SDK kubemq-js.
package kubemq_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/skipq/skipq/internal/kubemq/kubemqpb"
	"github.com/skipq/skipq/internal/node"
	"github.com/skipq/skipq/internal/node/nodetest"
	"github.com/skipq/skipq/internal/testdb"
	"github.com/skipq/skipq/internal/testport"
)

// env is one node: its HTTP base URL, its KubeMQ address and a client.
type env struct {
	URL  string
	Addr string
	DB   string
	kq   kubemqpb.KubemqClient
	conn *grpc.ClientConn
}

// newNode is a fresh database with one node on it serving KubeMQ (auth off
// unless configure says otherwise).
func newNode(t *testing.T, configure ...func(*node.Config)) env {
	t.Helper()
	db := testdb.New(t)
	return startOn(t, db, configure...)
}

func startOn(t *testing.T, db string, configure ...func(*node.Config)) env {
	t.Helper()
	addr := freeAddr(t)
	url := nodetest.Start(t, db, append([]func(*node.Config){func(c *node.Config) { c.KubeMQ.Addr = addr }}, configure...)...)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return env{URL: url, Addr: addr, DB: db, kq: kubemqpb.NewKubemqClient(conn), conn: conn}
}

// freeAddr is a loopback address in the KubeMQ tests' port range that
// nothing listens on now.
func freeAddr(t *testing.T) string {
	return fmt.Sprintf("127.0.0.1:%d", testport.Free(t, 23000))
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// withToken is ctx carrying an API key as the SDKs send it.
func withToken(c context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(c, "authorization", token)
}

const clientID = "test-client"

func msg(channel, body string) *kubemqpb.QueueMessage {
	return &kubemqpb.QueueMessage{ClientID: clientID, Channel: channel, Body: []byte(body)}
}

func (e env) send(t *testing.T, m *kubemqpb.QueueMessage) *kubemqpb.SendQueueMessageResult {
	t.Helper()
	r, err := e.kq.SendQueueMessage(ctx(t), m)
	if err != nil {
		t.Fatal(err)
	}
	if r.GetIsError() {
		t.Fatalf("send: %s", r.GetError())
	}
	return r
}

func (e env) pull(t *testing.T, channel string, max int32, peek bool) *kubemqpb.ReceiveQueueMessagesResponse {
	t.Helper()
	r, err := e.kq.ReceiveQueueMessages(ctx(t), &kubemqpb.ReceiveQueueMessagesRequest{ClientID: clientID,
		Channel: channel, MaxNumberOfMessages: max, WaitTimeSeconds: 1, IsPeak: peek})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetIsError() {
		t.Fatalf("pull: %s", r.GetError())
	}
	return r
}

// wantCode fails unless err is a gRPC status error of code.
func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v, want %s", err, code)
	}
}

// wantInBand fails unless an answer's in-band error starts with prefix.
func wantInBand(t *testing.T, isError bool, text, prefix string) {
	t.Helper()
	if !isError || !strings.HasPrefix(text, prefix) {
		t.Fatalf("answer IsError=%v %q, want an error starting %q", isError, text, prefix)
	}
}

// http does a native API request and decodes the answer into out (nil:
// none); it fails the test unless the status is want.
func (e env) http(t *testing.T, method, path string, body any, want int, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx(t), method, e.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, raw, want)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatal(err)
		}
	}
}

// nearNanos fails unless got (Unix ns) is within tolerance of want.
func nearNanos(t *testing.T, what string, got int64, want time.Time, tolerance time.Duration) {
	t.Helper()
	if d := time.Duration(got - want.UnixNano()); d < -tolerance || d > tolerance {
		t.Fatalf("%s = %d (%s), want about %s (off by %s)", what, got, time.Unix(0, got).UTC(), want.UTC(), d)
	}
}
