package sqs

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go/logging"
)

// serverView is the request as net/http hands it to the server: written
// to the wire and parsed back.
func serverView(t *testing.T, req *http.Request) (*http.Request, []byte) {
	t.Helper()
	var wire bytes.Buffer
	if err := req.Write(&wire); err != nil {
		t.Fatal(err)
	}
	r, err := http.ReadRequest(bufio.NewReader(&wire))
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(r.Body)
	return r, body.Bytes()
}

func verify(r *http.Request, body []byte, secret string, now time.Time) *apiError {
	a, err := parseAuthorization(r.Header.Get("Authorization"))
	if err != nil {
		return err
	}
	date, err := checkDate(r, a, now)
	if err != nil {
		return err
	}
	if err := checkSignedHeaders(r, a); err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	return verifySignature(r, hex.EncodeToString(sum[:]), a, date, signingKey(secret, a.date, a.region, a.service))
}

// The verifier agrees with aws-sdk-go-v2's signer (the oracle) over
// randomized requests: paths with spaces and unicode, query strings,
// extra and repeated headers, empty and large bodies, session tokens.
func TestSigV4AgainstSDKSigner(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var logBuf bytes.Buffer
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.LogSigning = true; o.Logger = logging.NewStandardLogger(&logBuf) })
	paths := []string{"/", "/sqs", "/a b/ü", "/000000000000/q.name-1", "/x%2Fy", "/~tilde/+plus"}
	for i := range 300 {
		body := make([]byte, []int{0, 10, 70000}[rng.IntN(3)])
		for j := range body {
			body[j] = byte('a' + rng.IntN(26))
		}
		u := &url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", 20000+rng.IntN(1000))}
		p := paths[rng.IntN(len(paths))]
		if strings.Contains(p, "%") {
			u.Path, u.RawPath = "/x/y", p
		} else {
			u.Path = p
		}
		if rng.IntN(3) == 0 {
			u.RawQuery = url.Values{"b": {"2 two", "1"}, "a": {"x~y*z"}}.Encode()
		}
		req, _ := http.NewRequest("POST", u.String(), bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Header.Set("X-Amz-Target", "AmazonSQS.SendMessage")
		if rng.IntN(2) == 0 {
			req.Header.Set("X-Amzn-Query-Mode", "true")
			req.Header.Add("X-Custom", "  spaced   value ")
			req.Header.Add("X-Custom", "second")
		}
		// The signer caches signing keys by access key id: one id per secret.
		creds := aws.Credentials{AccessKeyID: fmt.Sprintf("SKQ%017d", i), SecretAccessKey: fmt.Sprintf("secret-%d", i)}
		if rng.IntN(3) == 0 {
			creds.SessionToken = "token"
		}
		sum := sha256.Sum256(body)
		at := time.Now().Add(time.Duration(rng.IntN(600)-300) * time.Second).UTC()
		if err := signer.SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "sqs", "eu-west-1", at); err != nil {
			t.Fatal(err)
		}
		r, got := serverView(t, req)
		sdkLog := logBuf.String()
		logBuf.Reset()
		if err := verify(r, got, creds.SecretAccessKey, time.Now()); err != nil {
			t.Fatalf("request %d (%s %s): %v\n%s", i, r.Method, r.RequestURI, err, sdkLog)
		}
		if err := verify(r, got, creds.SecretAccessKey+"x", time.Now()); err == nil || err.shape != errSignatureDoesNotMatch {
			t.Fatalf("request %d: a wrong secret gave %v", i, err)
		}
		// A proxy's unsigned header changes nothing.
		r.Header.Set("X-Forwarded-For", "10.0.0.1")
		if err := verify(r, got, creds.SecretAccessKey, time.Now()); err != nil {
			t.Fatalf("request %d with an unsigned header: %v", i, err)
		}
		// A changed byte in the body or in any signed header fails.
		if len(got) > 0 {
			tampered := bytes.Clone(got)
			tampered[rng.IntN(len(tampered))] ^= 1
			if err := verify(r, tampered, creds.SecretAccessKey, time.Now()); err == nil {
				t.Fatalf("request %d: a changed body verified", i)
			}
		}
		a, _ := parseAuthorization(r.Header.Get("Authorization"))
		for _, h := range a.signedHeaders {
			c := r.Clone(context.Background())
			switch h {
			case "host":
				c.Host += "0"
			case "content-length":
				c.Header.Set("Content-Length", "1"+c.Header.Get("Content-Length"))
			case "x-amz-date":
				continue // covered by RequestExpired and the scope
			default:
				c.Header.Set(h, c.Header.Get(h)+"x")
			}
			if err := verify(c, got, creds.SecretAccessKey, time.Now()); err == nil {
				t.Fatalf("request %d: a changed %s verified", i, h)
			}
		}
	}
}

// botocore signs a fixed header set (content-type, host, x-amz-date,
// x-amz-target, x-amzn-query-mode); a signature of that form, computed
// independently here, verifies.
func TestSigV4BotocoreHeaderSet(t *testing.T) {
	body := []byte(`{"QueueName":"q"}`)
	req, _ := http.NewRequest("POST", "http://127.0.0.1:20001/", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS.CreateQueue")
	req.Header.Set("X-Amzn-Query-Mode", "true")
	req.Header.Set("User-Agent", "Boto3/1.43.11")
	now := time.Now().UTC()
	date := now.Format("20060102T150405Z")
	req.Header.Set("X-Amz-Date", date)
	sum := sha256.Sum256(body)
	canonical := "POST\n/\n\ncontent-type:application/x-amz-json-1.0\nhost:127.0.0.1:20001\nx-amz-date:" + date +
		"\nx-amz-target:AmazonSQS.CreateQueue\nx-amzn-query-mode:true\n\ncontent-type;host;x-amz-date;x-amz-target;x-amzn-query-mode\n" +
		hex.EncodeToString(sum[:])
	crSum := sha256.Sum256([]byte(canonical))
	scope := date[:8] + "/us-east-1/sqs/aws4_request"
	sig := hmacSHA256(signingKey("s3cret", date[:8], "us-east-1", "sqs"), "AWS4-HMAC-SHA256\n"+date+"\n"+scope+"\n"+hex.EncodeToString(crSum[:]))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKID/"+scope+
		", SignedHeaders=content-type;host;x-amz-date;x-amz-target;x-amzn-query-mode, Signature="+hex.EncodeToString(sig))
	r, got := serverView(t, req)
	if err := verify(r, got, "s3cret", now); err != nil {
		t.Fatal(err)
	}
	if err := verify(r, got, "s3cret", now.Add(16*time.Minute)); err == nil || err.shape != errRequestExpired {
		t.Fatalf("16 minutes later: %v", err)
	}
}

func TestParseAuthorizationRefusals(t *testing.T) {
	for _, h := range []string{
		"AWS4-ECDSA-P256-SHA256 Credential=a/20260101/sqs/aws4_request, SignedHeaders=host, Signature=00",
		"AWS4-HMAC-SHA256 Credential=a/20260101/us-east-1/sqs/aws4_request, SignedHeaders=x-amz-date, Signature=" + strings.Repeat("0", 64),
		"AWS4-HMAC-SHA256 Credential=a/20260101/us-east-1/sqs/aws4_request, SignedHeaders=x-amz-date;host, Signature=" + strings.Repeat("0", 64),
		"AWS4-HMAC-SHA256 Credential=a/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=" + strings.Repeat("0", 64),
		"AWS4-HMAC-SHA256 Credential=a/20260101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=zz",
		"AWS4-HMAC-SHA256 Credential=a/20260101/US_EAST$1/sqs/aws4_request, SignedHeaders=host, Signature=" + strings.Repeat("0", 64),
		"AWS4-HMAC-SHA256 Credential=a//sqs/aws4_request, SignedHeaders=host, Signature=" + strings.Repeat("0", 64),
		"AWS4-HMAC-SHA256 Credential=a/2026011/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=" + strings.Repeat("0", 64),
		"AWS4-HMAC-SHA256 Credential=a/20261301/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=" + strings.Repeat("0", 64),
		"Bearer skq_x",
	} {
		if _, err := parseAuthorization(h); err == nil || err.shape != errIncompleteSignature {
			t.Errorf("%q: %v", h, err)
		}
	}
}

// A remembered signing key is the one derived afresh, for its own scope
// only: another key id, day or region gets its own.
func TestSigningKeysPerScope(t *testing.T) {
	master := bytes.Repeat([]byte{7}, 32)
	var keys signingKeys
	scope := sigv4Auth{accessKeyID: "SKQAAAAAAAAAAAAAAAAA", date: "20261202", region: "us-east-1", service: "sqs"}
	fresh := func(a sigv4Auth) []byte {
		return signingKey(DeriveSecret(master, a.accessKeyID), a.date, a.region, a.service)
	}
	for range 2 {
		if got := keys.of(master, scope); !bytes.Equal(got, fresh(scope)) {
			t.Fatalf("signing key %x, want %x", got, fresh(scope))
		}
	}
	for _, other := range []sigv4Auth{
		{accessKeyID: "SKQAAAAAAAAAAAAAAAAB", date: scope.date, region: scope.region, service: scope.service},
		{accessKeyID: scope.accessKeyID, date: "20261203", region: scope.region, service: scope.service},
		{accessKeyID: scope.accessKeyID, date: scope.date, region: "eu-west-1", service: scope.service},
	} {
		got := keys.of(master, other)
		if !bytes.Equal(got, fresh(other)) || bytes.Equal(got, fresh(scope)) {
			t.Fatalf("%+v: signing key %x, want %x", other, got, fresh(other))
		}
	}
}

func TestDeriveSecret(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	s := DeriveSecret(key, "SKQAAAAAAAAAAAAAAAAA")
	if len(s) != 40 || s != DeriveSecret(key, "SKQAAAAAAAAAAAAAAAAA") || s == DeriveSecret(key, "SKQAAAAAAAAAAAAAAAAB") {
		t.Fatalf("secret %q", s)
	}
	if id := NewAccessKeyID(); len(id) != 20 || !strings.HasPrefix(id, "SKQ") || strings.ToUpper(id) != id {
		t.Fatalf("access key id %q", id)
	}
	if _, err := ParseMasterKey("c2hvcnQ="); err == nil {
		t.Fatal("a short master key was accepted")
	}
}

// A signature that leaves X-Amz-Target, Content-Type or the date unsigned
// is refused even when it is right: else a captured request's action could
// be swapped within the clock skew. (Only host was once required.)
func TestSignedHeadersMustCoverTheAction(t *testing.T) {
	body := []byte(`{"QueueUrl":"q"}`)
	now := time.Now().UTC()
	date := now.Format("20060102T150405Z")
	scope := date[:8] + "/us-east-1/sqs/aws4_request"
	sign := func(signed string, headers map[string]string) *http.Request {
		req, _ := http.NewRequest("POST", "http://127.0.0.1:20001/", bytes.NewReader(body))
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		a := sigv4Auth{date: date[:8], region: "us-east-1", service: "sqs", signedHeaders: strings.Split(signed, ";")}
		r, _ := serverView(t, req)
		req.Body = io.NopCloser(bytes.NewReader(body))
		sum := sha256.Sum256(body)
		crSum := sha256.Sum256([]byte(canonicalRequest(r, a.signedHeaders, hex.EncodeToString(sum[:]))))
		sig := hmacSHA256(signingKey("s3cret", date[:8], "us-east-1", "sqs"), sigv4Algorithm+"\n"+date+"\n"+scope+"\n"+hex.EncodeToString(crSum[:]))
		req.Header.Set("Authorization", sigv4Algorithm+" Credential=AKID/"+scope+", SignedHeaders="+signed+", Signature="+hex.EncodeToString(sig))
		return req
	}
	all := map[string]string{"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.PurgeQueue", "X-Amz-Date": date}
	r, got := serverView(t, sign("content-type;host;x-amz-date;x-amz-target", all))
	if err := verify(r, got, "s3cret", now); err != nil {
		t.Fatalf("all signed: %v", err)
	}
	for _, signed := range []string{"host;x-amz-date", "content-type;host;x-amz-date", "host;x-amz-date;x-amz-target", "content-type;host;x-amz-target"} {
		r, got := serverView(t, sign(signed, all))
		if err := verify(r, got, "s3cret", now); err == nil || err.shape != errIncompleteSignature {
			t.Errorf("SignedHeaders=%s: %v", signed, err)
		}
	}
	// Without a Content-Type header, none need be signed.
	r, got = serverView(t, sign("host;x-amz-date;x-amz-target", map[string]string{"X-Amz-Target": "AmazonSQS.PurgeQueue", "X-Amz-Date": date}))
	if err := verify(r, got, "s3cret", now); err != nil {
		t.Fatalf("no Content-Type: %v", err)
	}
}
