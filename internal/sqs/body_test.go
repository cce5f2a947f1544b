package sqs_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/console"
	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/handlers"
	"github.com/skipq/skipq/internal/metrics"
	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/sqs"
	"github.com/skipq/skipq/internal/sqs/sqsstate"
	"github.com/skipq/skipq/internal/testdb"
)

var testMasterKey = bytes.Repeat([]byte{7}, 32)

// endpoint is a node's HTTP handler (native API and SQS) on a fresh
// database, with the given auth mode, request limit and budget of request
// bytes in flight.
func endpoint(t *testing.T, authOff bool, maxRequest int64, budget *service.BodyBudget) (http.Handler, *service.Service) {
	h, svc, _ := endpointOn(t, testdb.New(t), authOff, maxRequest, budget)
	return h, svc
}

// endpointOn is endpoint on the database at url, with its pool.
func endpointOn(t *testing.T, url string, authOff bool, maxRequest int64, budget *service.BodyBudget) (http.Handler, *service.Service, *pgxpool.Pool) {
	t.Helper()
	pool, err := db.NewPool(context.Background(), url, db.PoolOptions{MaxConns: 4, ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := service.New(pool, service.Options{Limits: service.DefaultLimits(), Log: log})
	keys := auth.New(pool, 0)
	return handlers.New(svc, handlers.Config{
		AuthOff: authOff, Keys: keys, MaxRequestBytes: maxRequest, RequestBytes: budget, Log: log, Metrics: metrics.New(nil, nil),
		Ready: func(*gin.Context) error { return nil },
		SQS: sqs.New(svc, sqsstate.New(pool, svc, log), sqs.Config{AuthOff: authOff, Keys: keys, MasterKey: testMasterKey, MaxRequestBytes: maxRequest,
			RequestBytes: budget}),
		Console: console.New(svc, console.Config{AuthOff: authOff, Keys: keys, Log: log}),
	}), svc, pool
}

// countingBody is a request body of size bytes that counts what the
// server read of it, without holding it in memory.
type countingBody struct {
	size, read atomic.Int64
}

func newCountingBody(size int64) *countingBody {
	b := &countingBody{}
	b.size.Store(size)
	return b
}

func (b *countingBody) Read(p []byte) (int, error) {
	left := b.size.Load() - b.read.Load()
	if left <= 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), left))
	for i := range p[:n] {
		p[i] = 'a'
	}
	b.read.Add(int64(n))
	return n, nil
}

func (b *countingBody) Close() error { return nil }

// signHeaders signs req over its headers with a made-up payload hash: the
// body is never part of what these requests are refused for.
func signHeaders(t *testing.T, req *http.Request, akid, secret string) {
	t.Helper()
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret},
		req, strings.Repeat("0", 64), "sqs", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
}

// Nothing beyond a header-sized prefix of an SQS request is read before its
// caller is identified: no credentials, a made-up key, a malformed scope,
// an unsigned X-Amz-Target, and the old query protocol's form bodies. (The
// endpoint once read every body whole first: 30 such 16 MiB requests took
// a node to 1.2 GiB.)
func TestUnauthenticatedSQSBodiesAreNotRead(t *testing.T) {
	const size = 16 << 20
	h, _ := endpoint(t, false, size, service.NewBodyBudget(4*size))
	jsonRequest := func() *http.Request {
		req := httptest.NewRequest("POST", "http://skipq/", nil)
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Header.Set("X-Amz-Target", "AmazonSQS.SendMessage")
		return req
	}
	for _, c := range []struct {
		name    string
		request func() *http.Request
		status  int
		code    string
		maxRead int64
	}{
		{"no credentials", jsonRequest, 403, "MissingAuthenticationToken", 0},
		{"made-up access key", func() *http.Request {
			req := jsonRequest()
			signHeaders(t, req, "SKQAAAAAAAAAAAAAAAAA", "secret")
			return req
		}, 403, "InvalidClientTokenId", 0},
		{"malformed region", func() *http.Request {
			req := jsonRequest()
			signHeaders(t, req, "SKQAAAAAAAAAAAAAAAAA", "secret")
			req.Header.Set("Authorization", strings.Replace(req.Header.Get("Authorization"), "/us-east-1/", "/US_EAST$1/", 1))
			return req
		}, 400, "IncompleteSignature", 0},
		{"unsigned X-Amz-Target", func() *http.Request {
			req := jsonRequest()
			signHeaders(t, req, "SKQAAAAAAAAAAAAAAAAA", "secret")
			a := req.Header.Get("Authorization")
			i, j := strings.Index(a, "SignedHeaders="), strings.Index(a, ", Signature=")
			req.Header.Set("Authorization", a[:i]+"SignedHeaders=content-type;host;x-amz-date"+a[j:])
			return req
		}, 400, "IncompleteSignature", 0},
		{"query protocol form", func() *http.Request {
			req := httptest.NewRequest("POST", "http://skipq/", nil)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return req
		}, 404, "", 4 << 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := c.request()
			body := newCountingBody(size)
			req.Body, req.ContentLength = body, size
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != c.status || c.code != "" && !strings.HasPrefix(rec.Header().Get("X-Amzn-Query-Error"), c.code+";") {
				t.Fatalf("%d %s: %s", rec.Code, rec.Header().Get("X-Amzn-Query-Error"), rec.Body)
			}
			if got := body.read.Load(); got > c.maxRead {
				t.Fatalf("read %d bytes of an unauthenticated body (at most %d allowed)", got, c.maxRead)
			}
		})
	}
}

// A signed request is still read whole and its body checked against the
// signature and a declared X-Amz-Content-Sha256.
func TestSignedBodyIsVerifiedAsItIsRead(t *testing.T) {
	h, _, pool := endpointOn(t, testdb.New(t), false, 1<<20, nil)
	admin := sqsKey(t, pool, "admin")
	send := func(body []byte, tamper func(*http.Request)) *httptest.ResponseRecorder {
		return admin.call(h, "CreateQueue", body, tamper)
	}
	body := []byte(`{"QueueName":"signed"}`)
	if rec := send(body, func(*http.Request) {}); rec.Code != 200 {
		t.Fatalf("signed: %d %s", rec.Code, rec.Body)
	}
	if rec := send(body, func(r *http.Request) { r.Body = io.NopCloser(strings.NewReader(`{"QueueName":"signee"}`)) }); rec.Code != 403 {
		t.Fatalf("another body: %d %s", rec.Code, rec.Body)
	}
	sum := sha256.Sum256([]byte("other"))
	if rec := send(body, func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:])) }); rec.Code != 403 {
		t.Fatalf("a declared hash of another body: %d %s", rec.Code, rec.Body)
	}
}

// sqsCredentials are an SQS access key and its secret.
type sqsCredentials struct{ akid, secret string }

// sqsKey makes an API key of role with SQS credentials.
func sqsKey(t *testing.T, pool *pgxpool.Pool, role string) sqsCredentials {
	t.Helper()
	keys := auth.New(pool, 0)
	key, _, err := keys.Create(context.Background(), "default", role, "sqs-"+role)
	if err != nil {
		t.Fatal(err)
	}
	akid, err := keys.SQSCredentials(context.Background(), key.ID, sqs.NewAccessKeyID)
	if err != nil {
		t.Fatal(err)
	}
	return sqsCredentials{akid: akid, secret: sqs.DeriveSecret(testMasterKey, akid)}
}

// call signs an SQS request of op with body as these credentials, lets
// tamper change it, and serves it with h.
func (c sqsCredentials) call(h http.Handler, op string, body []byte, tamper func(*http.Request)) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", "http://skipq/", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS."+op)
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: c.akid, SecretAccessKey: c.secret},
		req, hex.EncodeToString(sum[:]), "sqs", "us-east-1", time.Now()); err != nil {
		panic(err)
	}
	tamper(req)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// blockingBody is a request body that signals its first read and then
// waits for the test to let it go on.
type blockingBody struct {
	io.Reader
	started chan struct{}
	proceed chan struct{}
	once    atomic.Bool
}

func (b *blockingBody) Read(p []byte) (int, error) {
	if b.once.CompareAndSwap(false, true) {
		close(b.started)
		<-b.proceed
	}
	return b.Reader.Read(p)
}

func (b *blockingBody) Close() error { return nil }

// The node's budget of request bytes in flight is one for every route:
// while a native send holds most of it, a large SQS or native request gets
// 503 with Retry-After in its own error shape without its body being read,
// a chunked one is cut off as it crosses the budget, and requests that fit
// go on; once the holder is done, the refused request succeeds.
func TestRequestBytesBudget(t *testing.T) {
	const budget, large = 256 << 10, 160 << 10
	h, _ := endpoint(t, true, budget, service.NewBodyBudget(budget))
	pad := func(prefix, suffix string, size int) string {
		return prefix + strings.Repeat("a", size-len(prefix)-len(suffix)) + suffix
	}
	serve := func(method, path, contentType string, body io.Reader, length int64, headers ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "http://skipq"+path, body)
		req.ContentLength = length
		req.Header.Set("Content-Type", contentType)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	nativeSend := pad(`{"body":"`, `"}`, large)
	sqsSend := pad(`{"QueueUrl":"q","MessageBody":"`, `"}`, large)

	holder := &blockingBody{Reader: strings.NewReader(nativeSend), started: make(chan struct{}), proceed: make(chan struct{})}
	held := make(chan *httptest.ResponseRecorder)
	go func() {
		held <- serve("POST", "/v1/queues/q/messages", "application/json", holder, large)
	}()
	<-holder.started // its body is reserved and being read

	refusedSQS := newCountingBody(large)
	rec := serve("POST", "/", "application/x-amz-json-1.0", refusedSQS, large, "X-Amz-Target", "AmazonSQS.SendMessage")
	if rec.Code != 503 || rec.Header().Get("X-Amzn-Query-Error") != "ServiceUnavailable;Receiver" || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("SQS past the budget: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	if refusedSQS.read.Load() != 0 {
		t.Fatalf("SQS past the budget: %d bytes read", refusedSQS.read.Load())
	}
	refusedNative := newCountingBody(large)
	rec = serve("POST", "/v1/queues/q/messages", "application/json", refusedNative, large)
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), `"unavailable"`) || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("native past the budget: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	if refusedNative.read.Load() != 0 {
		t.Fatalf("native past the budget: %d bytes read", refusedNative.read.Load())
	}
	rec = serve("POST", "/v1/queues/q/messages", "application/json", strings.NewReader(nativeSend), -1)
	if rec.Code != 503 || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("chunked native past the budget: %d %s", rec.Code, rec.Body)
	}
	rec = serve("POST", "/", "application/x-amz-json-1.0", strings.NewReader(sqsSend), -1, "X-Amz-Target", "AmazonSQS.SendMessage")
	if rec.Code != 503 || rec.Header().Get("X-Amzn-Query-Error") != "ServiceUnavailable;Receiver" {
		t.Fatalf("chunked SQS past the budget: %d %s", rec.Code, rec.Body)
	}
	// The console reads its forms under the same budget: a chunked form
	// cut off by it is 503 too, not the empty form its fields would read.
	consoleSend := "body=" + strings.Repeat("a", large)
	rec = serve("POST", "/console/queues/q/send", "application/x-www-form-urlencoded", strings.NewReader(consoleSend), -1,
		"Origin", "http://skipq", "HX-Request", "true")
	if rec.Code != 503 || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "SKIPQ_MAX_INFLIGHT_BYTES") {
		t.Fatalf("chunked console form past the budget: %d %s", rec.Code, rec.Body)
	}
	small := `{"body":"fits"}`
	if rec := serve("POST", "/v1/queues/q/messages", "application/json", strings.NewReader(small), int64(len(small))); rec.Code != 201 {
		t.Fatalf("native within the budget: %d %s", rec.Code, rec.Body)
	}
	smallSQS := `{"QueueUrl":"q","MessageBody":"fits"}`
	if rec := serve("POST", "/", "application/x-amz-json-1.0", strings.NewReader(smallSQS), int64(len(smallSQS)),
		"X-Amz-Target", "AmazonSQS.SendMessage"); rec.Code != 200 {
		t.Fatalf("SQS within the budget: %d %s", rec.Code, rec.Body)
	}

	close(holder.proceed)
	if rec := <-held; rec.Code != 201 {
		t.Fatalf("the holder: %d %s", rec.Code, rec.Body)
	}
	if rec := serve("POST", "/", "application/x-amz-json-1.0", strings.NewReader(sqsSend), large,
		"X-Amz-Target", "AmazonSQS.SendMessage"); rec.Code != 200 {
		t.Fatalf("SQS once the budget is free again: %d %s", rec.Code, rec.Body)
	}
}
