package sqs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A hand-written verifier: the AWS SDKs ship signers only, and a signer
// with fixed header rules cannot reproduce the header set each client
// chose to sign (docs/SQS.md#authentication-and-roles). aws-sdk-go-v2's signer is the test oracle.

const sigv4Algorithm = "AWS4-HMAC-SHA256"

// maxClockSkew is how far a request's X-Amz-Date may be from the server's
// clock, as AWS allows.
const maxClockSkew = 15 * time.Minute

// sigv4Auth is a parsed Authorization header.
type sigv4Auth struct {
	accessKeyID   string
	date          string // yyyymmdd of the credential scope
	region        string
	service       string
	signedHeaders []string
	signature     []byte
}

func (a sigv4Auth) scope() string {
	return a.date + "/" + a.region + "/" + a.service + "/aws4_request"
}

// parseAuthorization parses `AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…,
// Signature=…`; anything else is IncompleteSignature.
func parseAuthorization(h string) (sigv4Auth, *apiError) {
	bad := func(why string) (sigv4Auth, *apiError) {
		return sigv4Auth{}, newError(errIncompleteSignature, "Authorization header is malformed: %s", why)
	}
	rest, ok := strings.CutPrefix(h, sigv4Algorithm+" ")
	if !ok {
		return bad("only " + sigv4Algorithm + " is supported")
	}
	fields := map[string]string{}
	for part := range strings.SplitSeq(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return bad("expected key=value pairs")
		}
		fields[k] = v
	}
	var a sigv4Auth
	cred := strings.Split(fields["Credential"], "/")
	if len(cred) != 5 || cred[0] == "" || cred[4] != "aws4_request" {
		return bad("Credential must be <access key id>/<date>/<region>/<service>/aws4_request")
	}
	a.accessKeyID, a.date, a.region, a.service = cred[0], cred[1], cred[2], cred[3]
	if a.service != "sqs" {
		return bad("the credential scope's service must be sqs")
	}
	if !validScopeDate(a.date) {
		return bad("the credential scope's date must be yyyymmdd")
	}
	if !validRegion(a.region) {
		return bad("the credential scope's region must be 1 to 32 lower-case letters, digits and dashes")
	}
	sh := fields["SignedHeaders"]
	if sh == "" {
		return bad("SignedHeaders is missing")
	}
	a.signedHeaders = strings.Split(sh, ";")
	if !slices.IsSorted(a.signedHeaders) || !slices.Contains(a.signedHeaders, "host") || strings.ToLower(sh) != sh {
		return bad("SignedHeaders must be lower-case, sorted and include host")
	}
	sig, err := hex.DecodeString(fields["Signature"])
	if err != nil || len(sig) != sha256.Size {
		return bad("Signature must be 64 hex digits")
	}
	a.signature = sig
	return a, nil
}

func validScopeDate(d string) bool {
	_, err := time.Parse("20060102", d)
	return len(d) == 8 && err == nil
}

// validRegion holds a region to the form of AWS's (us-east-1): it names
// ARNs and queue URLs, so nothing else may pass through.
func validRegion(r string) bool {
	if r == "" || len(r) > 32 {
		return false
	}
	for _, c := range r {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// checkDate checks the request's date header against the scope and the
// clock, and returns it.
func checkDate(r *http.Request, a sigv4Auth, now time.Time) (string, *apiError) {
	amzDate := r.Header.Get("X-Amz-Date")
	if amzDate == "" {
		amzDate = r.Header.Get("Date")
	}
	if amzDate == "" {
		return "", newError(errIncompleteSignature, "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
	}
	t, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil || amzDate[:8] != a.date {
		return "", newError(errRequestExpired, "The request's date %q is not yyyymmddThhmmssZ of the credential scope's date.", amzDate)
	}
	if d := now.Sub(t); d > maxClockSkew || d < -maxClockSkew {
		return "", newError(errRequestExpired, "Signature expired: %s is not within 15 minutes of the server's time %s.",
			amzDate, now.UTC().Format("20060102T150405Z"))
	}
	return amzDate, nil
}

// checkSignedHeaders refuses a signature that leaves a header unsigned
// which decides what the request does or when it was made: host, the date
// header, X-Amz-Target and Content-Type (when sent). Were X-Amz-Target
// unsigned, a captured request could be replayed as another action within
// the clock skew. Every SDK signs them all.
func checkSignedHeaders(r *http.Request, a sigv4Auth) *apiError {
	required := []string{"host"}
	if r.Header.Get("X-Amz-Date") != "" {
		required = append(required, "x-amz-date")
	} else if r.Header.Get("Date") != "" {
		required = append(required, "date")
	}
	for _, name := range []string{"x-amz-target", "content-type"} {
		if len(r.Header.Values(name)) > 0 {
			required = append(required, name)
		}
	}
	for _, name := range required {
		if !slices.Contains(a.signedHeaders, name) {
			return newError(errIncompleteSignature, "Authorization header is malformed: SignedHeaders must include %s", name)
		}
	}
	return nil
}

// verifySignature checks a's signature of r, whose body has the hex
// SHA-256 payloadHash, with the signing key of a's credential scope
// (signingKey). A declared X-Amz-Content-Sha256 must be the body's.
func verifySignature(r *http.Request, payloadHash string, a sigv4Auth, amzDate string, key []byte) *apiError {
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && !strings.EqualFold(h, payloadHash) {
		return signatureMismatch()
	}
	canonical := canonicalRequest(r, a.signedHeaders, payloadHash)
	crHash := sha256.Sum256([]byte(canonical))
	stringToSign := sigv4Algorithm + "\n" + amzDate + "\n" + a.scope() + "\n" + hex.EncodeToString(crHash[:])
	if !hmac.Equal(hmacSHA256(key, stringToSign), a.signature) {
		return signatureMismatch()
	}
	return nil
}

func signatureMismatch() *apiError {
	return newError(errSignatureDoesNotMatch, "The request signature we calculated does not match the signature you provided. "+
		"Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
}

func canonicalRequest(r *http.Request, signed []string, payloadHash string) string {
	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	b.WriteString(canonicalURI(r.URL))
	b.WriteByte('\n')
	b.WriteString(canonicalQuery(r.URL.RawQuery))
	b.WriteByte('\n')
	for _, name := range signed {
		b.WriteString(name)
		b.WriteByte(':')
		b.WriteString(canonicalHeaderValue(r, name))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(strings.Join(signed, ";"))
	b.WriteByte('\n')
	b.WriteString(payloadHash)
	return b.String()
}

// canonicalURI is the path as sent, encoded once more (non-S3 SigV4).
func canonicalURI(u *url.URL) string {
	p := u.EscapedPath()
	if p == "" {
		return "/"
	}
	return escape(p, true)
}

func canonicalQuery(raw string) string {
	if raw == "" {
		return ""
	}
	vals, _ := url.ParseQuery(raw) // clients encode what they sign; a bad pair fails the signature
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		vs := slices.Clone(vals[k])
		slices.Sort(vs)
		for _, v := range vs {
			parts = append(parts, escape(k, false)+"="+escape(v, false))
		}
	}
	return strings.Join(parts, "&")
}

func canonicalHeaderValue(r *http.Request, name string) string {
	var vals []string
	switch name {
	case "host":
		vals = []string{r.Host}
	case "content-length":
		vals = r.Header.Values("Content-Length")
		if len(vals) == 0 && r.ContentLength >= 0 {
			vals = []string{strconv.FormatInt(r.ContentLength, 10)}
		}
	default:
		vals = r.Header.Values(name)
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = strings.Join(strings.Fields(v), " ")
	}
	return strings.Join(out, ",")
}

// escape percent-encodes every byte but RFC 3986's unreserved characters
// (and "/" when keepSlash).
func escape(s string, keepSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == '~' || keepSlash && c == '/' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

func signingKey(secret, date, region, service string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), date)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, service)
	return hmacSHA256(k, "aws4_request")
}

// signingKeys remembers the signing key of each access key's credential
// scope (its day, region and service): deriving it from the master key is
// five HMACs, about 40 % of checking a request, and a client signs all its
// requests of a day with the same one. Only what is derived is kept:
// every request's signature is still checked, and its access key looked
// up (auth.Keys, which sees revocations) before its key is derived or
// read from here.
type signingKeys struct {
	mu      sync.Mutex
	entries map[credentialScope][]byte
}

type credentialScope struct{ accessKeyID, date, region, service string }

// signingKeysMax bounds the remembered keys; at the bound they are all
// dropped (a day's worth of an endpoint's clients is far fewer).
const signingKeysMax = 10000

// of is the signing key of a's scope, derived from masterKey.
func (c *signingKeys) of(masterKey []byte, a sigv4Auth) []byte {
	scope := credentialScope{a.accessKeyID, a.date, a.region, a.service}
	c.mu.Lock()
	key, ok := c.entries[scope]
	c.mu.Unlock()
	if ok {
		return key
	}
	key = signingKey(DeriveSecret(masterKey, a.accessKeyID), a.date, a.region, a.service)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= signingKeysMax {
		c.entries = map[credentialScope][]byte{}
	}
	c.entries[scope] = key
	return key
}

// DeriveSecret is the secret access key of an access key id (docs/DESIGN.md#the-sqs-endpoint
// D1): never stored, re-derived from the servers' master key.
func DeriveSecret(masterKey []byte, accessKeyID string) string {
	mac := hmacSHA256(masterKey, "skipq-sigv4-v1:"+accessKeyID)
	return base64.RawURLEncoding.EncodeToString(mac)[:40]
}

// ParseMasterKey decodes SKIPQ_SIGV4_MASTER_KEY (base64, at least 32 bytes).
func ParseMasterKey(v string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		k, err = base64.RawStdEncoding.DecodeString(v)
	}
	if err != nil {
		return nil, errMasterKey
	}
	if len(k) < 32 {
		return nil, errMasterKey
	}
	return k, nil
}
