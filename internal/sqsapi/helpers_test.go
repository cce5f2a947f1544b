// Package sqsapi_test drives skipq's SQS endpoint with the official AWS
// clients (aws-sdk-go-v2, boto3, the AWS CLI) against real nodes and a real
// PostgreSQL.
package sqsapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/skipq/skipq/internal/node"
	"github.com/skipq/skipq/internal/node/nodetest"
	"github.com/skipq/skipq/internal/testdb"
)

type env struct {
	URL string
	DB  string
}

// newNode is a fresh database with one node on it (auth off unless
// configure says otherwise).
func newNode(t *testing.T, configure ...func(*node.Config)) env {
	t.Helper()
	db := testdb.New(t)
	return env{URL: nodetest.Start(t, db, configure...), DB: db}
}

// client is an SQS client configured as an application would be: from the
// environment only (AWS_ENDPOINT_URL_SQS), default options.
func client(t *testing.T, endpoint, akid, secret string) *sqs.Client {
	t.Helper()
	t.Setenv("AWS_ENDPOINT_URL_SQS", endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", akid)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return sqs.NewFromConfig(cfg)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// apiCode is the error code an application compares (the query code).
func apiCode(t *testing.T, err error) string {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("not an API error: %v", err)
	}
	return ae.ErrorCode()
}

// must returns v or, on an error, fails the running test by panicking
// (Go cannot pass a call's two results on next to t).
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("unexpected error: %v", err))
	}
	return v
}

var str = aws.String

// rawResponse is an SQS answer read without an SDK.
type rawResponse struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    string
}

// raw posts an unsigned SQS JSON request to url (auth off).
func raw(t *testing.T, url, op string, body any, headers ...string) rawResponse {
	t.Helper()
	var payload []byte
	switch b := body.(type) {
	case string:
		payload = []byte(b)
	default:
		payload, _ = json.Marshal(b)
	}
	req, err := http.NewRequest("POST", url, bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS."+op)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := rawResponse{Status: resp.StatusCode, Header: resp.Header, Raw: string(b)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-amz-json-1.0") {
		if err := json.Unmarshal(b, &out.Body); err != nil {
			t.Fatalf("%s: answer is not a JSON object: %s", op, b)
		}
	}
	return out
}

// sqsError checks an SQS error answer: status, __type name and query code.
func (r rawResponse) sqsError(t *testing.T, status int, typ, code string) {
	t.Helper()
	gotType, _ := r.Body["__type"].(string)
	if r.Status != status || !strings.HasSuffix(gotType, "#"+typ) ||
		r.Header.Get("X-Amzn-Query-Error") != code+";Sender" || r.Header.Get("X-Amzn-Requestid") == "" {
		t.Fatalf("want %d %s (%s), got %d %s %q: %s", status, typ, code, r.Status, gotType,
			r.Header.Get("X-Amzn-Query-Error"), r.Raw)
	}
}

func decodeJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, s)
	}
}
