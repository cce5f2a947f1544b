package sqsapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/node"
	"github.com/skipq/skipq/internal/service"
	skipqsqs "github.com/skipq/skipq/internal/sqs"
)

// masterKey is the tests' SKIPQ_SIGV4_MASTER_KEY.
var masterKey = base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

// authNode is a node with auth required and SQS credentials configured.
func authNode(t *testing.T) (env, *service.Service, *auth.Keys) {
	t.Helper()
	n := newNode(t, func(c *node.Config) { c.Auth = "required"; c.SQS.MasterKey = masterKey })
	pool, err := db.NewPool(context.Background(), n.DB, db.PoolOptions{MaxConns: 2, ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return n, service.New(pool, service.Options{Limits: service.DefaultLimits()}), auth.New(pool, 0)
}

// credentials creates a key and returns its SQS credentials, as
// `skipq keys sqs-credentials` would print them.
func credentials(t *testing.T, keys *auth.Keys, tenant, role string) (akid, secret string, keyID int64) {
	t.Helper()
	key, _, err := keys.Create(context.Background(), tenant, role, tenant+"-"+role)
	if err != nil {
		t.Fatal(err)
	}
	akid, err = keys.SQSCredentials(context.Background(), key.ID, skipqsqs.NewAccessKeyID)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(masterKey)
	return akid, skipqsqs.DeriveSecret(raw, akid), key.ID
}

// SigV4 with derived credentials, roles and tenants.
func TestAuth(t *testing.T) {
	n, _, keys := authNode(t)
	cx := ctx(t)
	akid, secret, _ := credentials(t, keys, "acme", "write")
	c := client(t, n.URL, akid, secret)
	q := createQueue(t, c, "secure", nil)
	if want := n.URL + "/"; len(q) < len(want) || q[:len(want)] != want || q == n.URL+"/000000000000/secure" {
		t.Fatalf("queue URL %s: want acme's account, not default's", q)
	}
	sent := must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: str("signed")}))
	got := must(c.ReceiveMessage(cx, &sqs.ReceiveMessageInput{QueueUrl: &q,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{"SenderId"}}))
	if len(got.Messages) != 1 || *got.Messages[0].MessageId != *sent.MessageId || got.Messages[0].Attributes["SenderId"] != akid {
		t.Fatalf("received %+v", got.Messages)
	}

	code := func(c *sqs.Client) string {
		t.Helper()
		_, err := c.GetQueueUrl(cx, &sqs.GetQueueUrlInput{QueueName: str("secure")})
		if err == nil {
			return ""
		}
		return apiCode(t, err)
	}
	if got := code(client(t, n.URL, akid, secret+"x")); got != "SignatureDoesNotMatch" {
		t.Fatalf("wrong secret: %s", got)
	}
	if got := code(client(t, n.URL, "SKQAAAAAAAAAAAAAAAAA", secret)); got != "InvalidClientTokenId" {
		t.Fatalf("unknown access key: %s", got)
	}
	revokedID, revokedSecret, keyID := credentials(t, keys, "acme", "admin")
	if _, err := keys.Revoke(cx, keyID); err != nil {
		t.Fatal(err)
	}
	if got := code(client(t, n.URL, revokedID, revokedSecret)); got != "InvalidClientTokenId" {
		t.Fatalf("revoked key: %s", got)
	}
	raw(t, n.URL, "GetQueueUrl", map[string]any{"QueueName": "secure"}).sqsError(t, 403, "MissingAuthenticationToken", "MissingAuthenticationToken")

	readID, readSecret, _ := credentials(t, keys, "acme", "read")
	reader := client(t, n.URL, readID, readSecret)
	if code(reader) != "" {
		t.Fatal("a read key cannot look a queue up")
	}
	_, err := reader.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: str("x")})
	if apiCode(t, err) != "AccessDenied" {
		t.Fatalf("read key send: %v", err)
	}
	otherID, otherSecret, _ := credentials(t, keys, "globex", "admin")
	_, err = client(t, n.URL, otherID, otherSecret).SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: str("x")})
	var missing *types.QueueDoesNotExist
	if !errors.As(err, &missing) {
		t.Fatalf("another tenant's queue: %v", err)
	}

	// Signed 20 minutes ago: RequestExpired.
	body := []byte(`{"QueueName":"secure"}`)
	req, _ := http.NewRequest("POST", n.URL+"/", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS.GetQueueUrl")
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(cx, aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret}, req,
		hex.EncodeToString(sum[:]), "sqs", "us-east-1", time.Now().Add(-20*time.Minute)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-Query-Error") != "RequestExpired;Sender" {
		t.Fatalf("20 minutes old: %d %s", resp.StatusCode, resp.Header.Get("X-Amzn-Query-Error"))
	}
}

// Without SKIPQ_SIGV4_MASTER_KEY and with auth required, every SQS request
// is refused with InvalidClientTokenId.
func TestAuthWithoutMasterKey(t *testing.T) {
	n := newNode(t, func(c *node.Config) { c.Auth = "required" })
	_, err := client(t, n.URL, "SKQAAAAAAAAAAAAAAAAA", "x").ListQueues(ctx(t), &sqs.ListQueuesInput{})
	if apiCode(t, err) != "InvalidClientTokenId" {
		t.Fatalf("no master key: %v", err)
	}
}

// noRetries is an SDK client that reports a throttle instead of retrying.
func noRetries(c *sqs.Client) *sqs.Client {
	return sqs.New(c.Options(), func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
}

// SKIPQ_RATE_LIMIT applies to SQS requests, in the same buckets as the
// native API's: RequestThrottled (a throttle code for the SDKs) with
// Retry-After.
func TestRateLimit(t *testing.T) {
	n := newNode(t, func(c *node.Config) { c.RateLimit = 0.01; c.RateBurst = 2 })
	for range 2 {
		if r := raw(t, n.URL, "ListQueues", map[string]any{}); r.Status != 200 {
			t.Fatalf("within the burst: %d %s", r.Status, r.Raw)
		}
	}
	r := raw(t, n.URL, "ListQueues", map[string]any{})
	r.sqsError(t, 403, "RequestThrottled", "RequestThrottled")
	if r.Header.Get("Retry-After") == "" || r.Header.Get("Retry-After") == "0" {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	if s, _ := native(t, "GET", n.URL+"/v1/queues", nil); s != http.StatusTooManyRequests {
		t.Fatalf("the native API after the SQS requests spent the bucket: %d", s)
	}
}

// Failed SQS authentications count against the client's address as
// native ones do; past the budget, unknown credentials are throttled
// without a lookup while a key the node verified goes on working.
func TestAuthFailureLimit(t *testing.T) {
	n := newNode(t, func(c *node.Config) {
		c.Auth = "required"
		c.SQS.MasterKey = masterKey
		c.AuthFailureLimit = 0.01
		c.AuthFailureBurst = 2
	})
	pool, err := db.NewPool(context.Background(), n.DB, db.PoolOptions{MaxConns: 2, ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	akid, secret, _ := credentials(t, auth.New(pool, 0), "acme", "admin")
	cx := ctx(t)
	good := client(t, n.URL, akid, secret)
	must(good.ListQueues(cx, &sqs.ListQueuesInput{}))
	bad := noRetries(client(t, n.URL, akid, "wrong-secret-wrong-secret-wrong-secret00"))
	for range 2 {
		if _, err := bad.ListQueues(cx, &sqs.ListQueuesInput{}); apiCode(t, err) != "SignatureDoesNotMatch" {
			t.Fatalf("bad signature: %v", err)
		}
	}
	unknown := noRetries(client(t, n.URL, "SKQAAAAAAAAAAAAAAAAA", secret))
	if _, err := unknown.ListQueues(cx, &sqs.ListQueuesInput{}); apiCode(t, err) != "RequestThrottled" {
		t.Fatalf("unknown key past the budget: %v", err)
	}
	good = client(t, n.URL, akid, secret)
	must(good.ListQueues(cx, &sqs.ListQueuesInput{}))
}

// SQS calls record their key in a traced message's history (docs/API.md#history):
// the key its access key id belongs to.
func TestHistoryNamesTheSQSKey(t *testing.T) {
	n, svc, keys := authNode(t)
	cx := ctx(t)
	akid, secret, keyID := credentials(t, keys, "acme", "admin")
	on := true
	if _, _, err := svc.PutQueue(cx, "acme", "traced", service.QueueSettings{Trace: &on}); err != nil {
		t.Fatal(err)
	}
	c := client(t, n.URL, akid, secret)
	q := *must(c.GetQueueUrl(cx, &sqs.GetQueueUrlInput{QueueName: aws.String("traced")})).QueueUrl
	sent := must(c.SendMessage(cx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("b")}))
	got := must(c.ReceiveMessage(cx, &sqs.ReceiveMessageInput{QueueUrl: &q}))
	if len(got.Messages) != 1 {
		t.Fatalf("received %d", len(got.Messages))
	}
	must(c.DeleteMessage(cx, &sqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: got.Messages[0].ReceiptHandle}))
	events, err := svc.MessageHistory(cx, "acme", "traced", *sent.MessageId)
	if err != nil || len(events) != 3 {
		t.Fatalf("history: %+v (%v)", events, err)
	}
	for _, e := range events {
		if e.KeyID == nil || *e.KeyID != keyID {
			t.Errorf("%s: keyId %v, want %d", e.Type, e.KeyID, keyID)
		}
	}
}
