// Package sqs is skipq's SQS-compatible endpoint (docs/SQS.md): the AWS JSON
// 1.0 protocol (X-Amz-Target: AmazonSQS.*), SigV4 verification, SQS's
// errors and checksums, on top of the service package (never over HTTP).
package sqs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/sqs/sqsstate"
)

// Config is the endpoint's configuration (docs/SQS.md#settings).
type Config struct {
	AuthOff bool
	// Keys are the node's API keys, whose SQS access key ids sign
	// requests (nil only with AuthOff).
	Keys *auth.Keys
	// MasterKey derives every SQS secret (nil: SigV4 not configured, and
	// with auth required every request is refused).
	MasterKey []byte
	// Region names ARNs of unsigned requests.
	Region string
	// URL, when set, is the fixed base of queue URLs.
	URL string
	// ForwardedBy are the proxies whose X-Forwarded-Proto and
	// X-Forwarded-Host make queue URLs (SKIPQ_TRUST_PROXY: those of
	// SKIPQ_TRUSTED_PROXIES, the proxies whose X-Forwarded-For names the
	// client); empty: no one's.
	ForwardedBy     []netip.Prefix
	MaxRequestBytes int64
	// RequestBytes is the node's budget of request body bytes in flight,
	// the one its native API holds too (nil: no budget).
	RequestBytes *service.BodyBudget
	// Now is the clock SigV4 dates are checked against (nil: time.Now).
	Now func() time.Time
}

// Handler serves SQS requests.
type Handler struct {
	svc     *service.Service
	state   *sqsstate.State // move tasks and FIFO receive attempts
	cfg     Config
	queues  queueCache
	signing signingKeys
}

// New returns the SQS endpoint of a node, on its queue service and its
// SQS state.
func New(svc *service.Service, state *sqsstate.State, cfg Config) *Handler {
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Handler{svc: svc, state: state, cfg: cfg}
}

// requestTimeout bounds every action but a receive's wait.
const requestTimeout = 30 * time.Second

// nativePrefixes are the paths SQS requests are never served at.
var nativePrefixes = []string{"/v1/", "/healthz", "/readyz", "/metrics"}

// Accepts reports whether r is an SQS request (or an old client's query
// protocol request, which gets a readable refusal).
func (h *Handler) Accepts(r *http.Request) bool {
	p := r.URL.Path
	if p == "/v1" {
		return false
	}
	for _, n := range nativePrefixes {
		if strings.HasPrefix(p, n) {
			return false
		}
	}
	if r.Header.Get("X-Amz-Target") != "" {
		return r.Method == http.MethodPost
	}
	return queryAction(r)
}

// queryPrefixBytes is how much of a form body queryAction reads: the query
// protocol's clients write Action first, and an unauthenticated request
// must not make the node hold more than this.
const queryPrefixBytes = 4 << 10

// queryAction reports whether r uses the AWS query protocol (Action=...).
// Only the first queryPrefixBytes of a form body are read; they are put
// back in front of the rest.
func queryAction(r *http.Request) bool {
	if r.URL.Query().Get("Action") != "" {
		return true
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if r.Method != http.MethodPost || ct != "application/x-www-form-urlencoded" {
		return false
	}
	prefix, err := io.ReadAll(io.LimitReader(r.Body, queryPrefixBytes))
	r.Body = readCloser{io.MultiReader(bytes.NewReader(prefix), r.Body), r.Body}
	if err != nil {
		return false
	}
	if len(prefix) == queryPrefixBytes {
		// The last pair may be cut short: only whole pairs count.
		prefix = prefix[:max(0, bytes.LastIndexByte(prefix, '&'))]
	}
	form, err := url.ParseQuery(string(prefix))
	return err == nil && form.Get("Action") != ""
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}

// caller is who a request acts as and how it names queues.
type caller struct {
	tenant   string
	role     int
	clientID string
	keyID    int64 // 0 with auth off
	region   string
	account  string
	base     string // queue URLs are base/account/name
	trace    string // X-Amzn-Trace-Id, stored as AWSTraceHeader when none is given
}

func (c *caller) queueURL(name string) string {
	return c.base + "/" + c.account + "/" + url.PathEscape(name)
}

func (c *caller) arn(name string) string {
	return "arn:aws:sqs:" + c.region + ":" + c.account + ":" + name
}

// accountID is the 12-digit account of a tenant (docs/SQS.md#queue-urls-accounts-and-arns).
func accountID(tenant string) string {
	if tenant == "default" {
		return "000000000000"
	}
	sum := sha256.Sum256([]byte(tenant))
	return fmt.Sprintf("%012d", binary.BigEndian.Uint64(sum[:8])%1_000_000_000_000)
}

// Limits are the node's per-caller limits for one request (the same type as
// handlers.CallerLimits, an alias of this unnamed interface): the rate
// limit of the caller's key, or of its address when auth is off, and the
// failed-authentication budget of its address.
type Limits = interface {
	Allow(keyID int64) (ok bool, retryAfter time.Duration)
	AuthFailed()
	AuthBlocked() (blocked bool, retryAfter time.Duration)
}

// Serve answers one SQS request.
func (h *Handler) Serve(c *gin.Context, requestID string, limits Limits) {
	c.Header("x-amzn-RequestId", requestID)
	r := c.Request
	target := r.Header.Get("X-Amz-Target")
	if target == "" {
		refuseQueryProtocol(c, requestID)
		return
	}
	out, err := h.serve(c, target, limits)
	if err != nil {
		writeError(c, err)
		return
	}
	raw, merr := json.Marshal(out)
	if merr != nil {
		writeError(c, &apiError{shape: errInternal, message: "internal error", err: merr})
		return
	}
	c.Data(http.StatusOK, "application/x-amz-json-1.0", raw)
}

func (h *Handler) serve(c *gin.Context, target string, limits Limits) (any, *apiError) {
	r := c.Request
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/x-amz-json-1.0", "application/json", "application/x-amz-json-1.1":
	default:
		return nil, newError(errSerialization, "Content-Type must be application/x-amz-json-1.0, not %q", r.Header.Get("Content-Type"))
	}
	if r.ContentLength > h.cfg.MaxRequestBytes {
		return nil, newError(errTooLarge, "The request body exceeds %d bytes.", h.cfg.MaxRequestBytes)
	}
	// The caller is identified from the headers alone: a request without
	// credentials, or with an unknown key or a malformed scope, is refused
	// before any of its body is read.
	who, signed, aerr := h.identify(r, limits)
	if aerr != nil {
		return nil, aerr
	}
	admitted, release, err := h.cfg.RequestBytes.Admit(r.Body, r.ContentLength)
	if err != nil {
		return nil, fromService(err)
	}
	defer release()
	body, payloadHash, aerr := h.readBody(admitted, r.ContentLength, signed != nil)
	if aerr != nil {
		return nil, aerr
	}
	if signed != nil {
		if aerr := verifySignature(r, payloadHash, signed.auth, signed.amzDate, signed.key); aerr != nil {
			limits.AuthFailed()
			return nil, aerr
		}
	}
	if ok, wait := limits.Allow(who.keyID); !ok {
		return nil, throttled(wait, "Rate exceeded; retry after the Retry-After delay.")
	}
	op, ok := strings.CutPrefix(target, "AmazonSQS.")
	act, known := actions[op]
	if !ok || !known {
		return nil, newError(errUnknownOperation, "The action or operation %q is not valid for this endpoint.", target)
	}
	if act.run == nil {
		return nil, newError(errUnsupportedOperation, "%s is not supported by skipq.", op)
	}
	if who.role < act.role {
		return nil, newError(errAccessDenied, "This API key's role does not allow %s.", op)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	ctx := service.WithKeyID(r.Context(), who.keyID)
	if op != "ReceiveMessage" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, requestTimeout)
		defer cancel()
	}
	out, aerr := act.run(h, ctx, who, body)
	if aerr != nil && aerr.err != nil {
		_ = c.Error(aerr) // logged by the request logger
	}
	return out, aerr
}

// readBody reads a request body of declared length (negative: unknown),
// refusing one over SKIPQ_MAX_REQUEST_BYTES, into one buffer; with hash
// it also returns the hex SHA-256 of the body, computed as it is read.
func (h *Handler) readBody(body io.Reader, length int64, hash bool) ([]byte, string, *apiError) {
	limit := h.cfg.MaxRequestBytes
	var buf bytes.Buffer
	if length > 0 {
		buf.Grow(int(length) + bytes.MinRead) // one allocation: ReadFrom needs MinRead spare to see the end
	}
	sum := sha256.New()
	from := io.LimitReader(body, limit+1)
	if hash {
		from = io.TeeReader(from, sum)
	}
	if _, err := buf.ReadFrom(from); err != nil {
		if errors.Is(err, service.ErrBodyBudget) {
			return nil, "", fromService(err)
		}
		return nil, "", newError(errSerialization, "the request body could not be read")
	}
	if int64(buf.Len()) > limit {
		return nil, "", newError(errTooLarge, "The request body exceeds %d bytes.", limit)
	}
	return buf.Bytes(), hex.EncodeToString(sum.Sum(nil)), nil
}

// pendingSignature is what is left to check of a signed request once its
// key is known: the signature over the headers and the body, with the
// signing key of its credential scope.
type pendingSignature struct {
	auth    sigv4Auth
	amzDate string
	key     []byte
}

// identify resolves the caller from the request's headers: with auth off
// the default tenant's admin; else the SigV4 key its Authorization header
// names (docs/SQS.md#authentication-and-roles), whose signature the caller checks once the body is
// read (pendingSignature).
//
// A failed authentication counts against the client's address; an address
// that spent its budget of them is throttled unless its access key is one
// the node verified recently, so a flood of made-up credentials costs no
// queries while good clients behind the same address go on.
func (h *Handler) identify(r *http.Request, limits Limits) (*caller, *pendingSignature, *apiError) {
	who := &caller{tenant: "default", role: auth.RoleRank("admin"), clientID: "anonymous", region: h.cfg.Region}
	var signed *pendingSignature
	if h.cfg.AuthOff {
		if sig, err := parseAuthorization(r.Header.Get("Authorization")); err == nil {
			who.region = sig.region
		}
	} else {
		var aerr *apiError
		if signed, aerr = h.identifyKey(r, limits, who); aerr != nil {
			if aerr.shape != errThrottled && aerr.shape != errUnavailable && aerr.shape != errInternal {
				limits.AuthFailed()
			}
			return nil, nil, aerr
		}
	}
	who.account = accountID(who.tenant)
	who.base = h.baseURL(r)
	who.trace = r.Header.Get("X-Amzn-Trace-Id")
	return who, signed, nil
}

// identifyKey checks a request's Authorization header, date and access
// key, and makes who its key's caller.
func (h *Handler) identifyKey(r *http.Request, limits Limits, who *caller) (*pendingSignature, *apiError) {
	authz := r.Header.Get("Authorization")
	if authz == "" {
		return nil, newError(errMissingToken, "Request is missing Authentication Token")
	}
	sig, aerr := parseAuthorization(authz)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := checkSignedHeaders(r, sig); aerr != nil {
		return nil, aerr
	}
	amzDate, aerr := checkDate(r, sig, h.cfg.Now())
	if aerr != nil {
		return nil, aerr
	}
	if h.cfg.MasterKey == nil {
		return nil, newError(errInvalidClientTokenID, "SigV4 credentials are not configured on this server")
	}
	if blocked, wait := limits.AuthBlocked(); blocked && !h.cfg.Keys.CachedSQS(sig.accessKeyID) {
		return nil, throttled(wait, "Too many failed authentications from this address; retry after the Retry-After delay.")
	}
	key, err := h.cfg.Keys.AuthenticateSQS(r.Context(), sig.accessKeyID)
	if errors.Is(err, auth.ErrUnauthenticated) {
		return nil, newError(errInvalidClientTokenID, "The security token included in the request is invalid.")
	}
	if err != nil {
		return nil, fromService(err)
	}
	who.tenant, who.role, who.clientID, who.keyID, who.region = key.Tenant, auth.RoleRank(key.Role), sig.accessKeyID, key.ID, sig.region
	return &pendingSignature{auth: sig, amzDate: amzDate, key: h.signing.of(h.cfg.MasterKey, sig)}, nil
}

// baseURL is where queue URLs point: SKIPQ_SQS_URL, else where the caller
// reached this node (scheme, Host and the path it posted to).
func (h *Handler) baseURL(r *http.Request) string {
	if h.cfg.URL != "" {
		return strings.TrimSuffix(h.cfg.URL, "/")
	}
	scheme, host := "http", r.Host
	if r.TLS != nil {
		scheme = "https"
	}
	if h.forwarded(r) {
		if p := r.Header.Get("X-Forwarded-Proto"); p == "http" || p == "https" {
			scheme = p
		}
		if fh := r.Header.Get("X-Forwarded-Host"); fh != "" {
			host = fh
		}
	}
	return scheme + "://" + host + strings.TrimSuffix(r.URL.EscapedPath(), "/")
}

// forwarded reports whether r comes from a proxy whose forwarded headers
// are believed.
func (h *Handler) forwarded(r *http.Request) bool {
	if len(h.cfg.ForwardedBy) == 0 {
		return false
	}
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	for _, p := range h.cfg.ForwardedBy {
		if p.Contains(peer.Addr().Unmap()) {
			return true
		}
	}
	return false
}

// writeError writes an SQS JSON error (docs/SQS.md#protocol).
func writeError(c *gin.Context, e *apiError) {
	status, code, typ, fault := e.wire()
	c.Header("x-amzn-query-error", code+";"+fault)
	if e.retryable() {
		c.Header("Retry-After", strconv.Itoa(max(1, int(math.Ceil(e.retryAfter.Seconds())))))
	}
	msg := e.message
	if e.shape == errInternal {
		msg = "internal error; see the server log for this request id"
	}
	raw, _ := json.Marshal(map[string]string{"__type": typ, "message": msg})
	c.Abort()
	c.Data(status, "application/x-amz-json-1.0", raw)
}

// refuseQueryProtocol answers an old SDK in the XML it can parse.
func refuseQueryProtocol(c *gin.Context, requestID string) {
	c.Abort()
	c.Data(http.StatusBadRequest, "text/xml", []byte(
		"<ErrorResponse><Error><Type>Sender</Type><Code>InvalidAction</Code><Message>"+
			"skipq supports the AWS JSON 1.0 protocol only; upgrade the AWS SDK (aws-sdk-go-v2 sqs ≥ v1.28.0, "+
			"boto3 ≥ 1.34.90, AWS CLI v2 ≥ 2.13.34)</Message></Error><RequestId>"+html.EscapeString(requestID)+
			"</RequestId></ErrorResponse>"))
}

// decode reads a request body into in: unknown members are ignored, null
// is absent, a wrong JSON type is a SerializationException.
func decode(body []byte, in any) *apiError {
	if err := json.Unmarshal(body, in); err != nil {
		return newError(errSerialization, "The request body is not a valid request: %v", err)
	}
	return nil
}

// queueCache remembers the queues SQS requests name for a second, so a
// send or receive costs no extra query for the existence check and the
// queue's SQS settings. Changes made over SQS on this node drop the entry
// at once; other changes show within about queueCacheTTL. When an entry is
// stale, one request reads the queue again while the others go on with
// the stale entry: a busy queue costs one lookup per second, not one per
// request that arrives in the second it expired.
type queueCache struct {
	mu      sync.Mutex
	entries map[[2]string]*cachedQueue
}

type cachedQueue struct {
	q         service.SQSQueue
	expires   time.Time
	reloading bool
}

const (
	queueCacheTTL = time.Second
	queueCacheMax = 10000
)

func (h *Handler) cachedQueue(ctx context.Context, tenant, name string) (service.SQSQueue, *apiError) {
	k := [2]string{tenant, name}
	c := &h.queues
	c.mu.Lock()
	e, ok := c.entries[k]
	if ok && (time.Now().Before(e.expires) || e.reloading) {
		q := e.q
		c.mu.Unlock()
		return q, nil
	}
	if ok {
		e.reloading = true
	}
	c.mu.Unlock()
	q, err := h.svc.SQSQueue(ctx, tenant, name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if cur := c.entries[k]; cur == e && ok {
			// Gone (or unreadable): the next request reads it again.
			delete(c.entries, k)
		}
		return q, fromService(err)
	}
	if c.entries == nil || len(c.entries) >= queueCacheMax {
		c.entries = map[[2]string]*cachedQueue{}
	}
	c.entries[k] = &cachedQueue{q: q, expires: time.Now().Add(queueCacheTTL)}
	return q, nil
}

func (h *Handler) forget(tenant, name string) {
	h.queues.mu.Lock()
	delete(h.queues.entries, [2]string{tenant, name})
	h.queues.mu.Unlock()
}

// queueName resolves a QueueUrl (docs/SQS.md#queue-urls-accounts-and-arns): the last non-empty path
// segment, percent-decoded; a value without "/" is a bare name.
func queueName(queueURL *string) (string, *apiError) {
	if queueURL == nil || *queueURL == "" {
		return "", missingParameter("QueueUrl")
	}
	v := *queueURL
	if !strings.Contains(v, "/") {
		return v, nil
	}
	path := v
	if u, err := url.Parse(v); err == nil {
		path = u.EscapedPath()
	}
	segs := strings.Split(path, "/")
	for i := len(segs) - 1; i >= 0; i-- {
		if segs[i] == "" {
			continue
		}
		name, err := url.PathUnescape(segs[i])
		if err != nil {
			return "", queueDoesNotExist()
		}
		return name, nil
	}
	return "", queueDoesNotExist()
}

// action is one SQS operation: the role it needs and its implementation
// (nil: known but unsupported).
type action struct {
	role int
	run  func(h *Handler, ctx context.Context, who *caller, body []byte) (any, *apiError)
}

var actions map[string]action

func init() {
	read, write, admin := auth.RoleRank("read"), auth.RoleRank("write"), auth.RoleRank("admin")
	actions = map[string]action{
		"CreateQueue":                  {write, (*Handler).createQueue},
		"GetQueueUrl":                  {read, (*Handler).getQueueURL},
		"ListQueues":                   {read, (*Handler).listQueues},
		"DeleteQueue":                  {admin, (*Handler).deleteQueue},
		"GetQueueAttributes":           {read, (*Handler).getQueueAttributes},
		"SetQueueAttributes":           {admin, (*Handler).setQueueAttributes},
		"PurgeQueue":                   {write, (*Handler).purgeQueue},
		"ListDeadLetterSourceQueues":   {read, (*Handler).listDeadLetterSourceQueues},
		"TagQueue":                     {admin, (*Handler).tagQueue},
		"UntagQueue":                   {admin, (*Handler).untagQueue},
		"ListQueueTags":                {read, (*Handler).listQueueTags},
		"SendMessage":                  {write, (*Handler).sendMessage},
		"SendMessageBatch":             {write, (*Handler).sendMessageBatch},
		"ReceiveMessage":               {write, (*Handler).receiveMessage},
		"DeleteMessage":                {write, (*Handler).deleteMessage},
		"DeleteMessageBatch":           {write, (*Handler).deleteMessageBatch},
		"ChangeMessageVisibility":      {write, (*Handler).changeMessageVisibility},
		"ChangeMessageVisibilityBatch": {write, (*Handler).changeMessageVisibilityBatch},
		"AddPermission":                {read, nil},
		"RemovePermission":             {read, nil},
		"StartMessageMoveTask":         {write, (*Handler).startMessageMoveTask},
		"CancelMessageMoveTask":        {write, (*Handler).cancelMessageMoveTask},
		"ListMessageMoveTasks":         {read, (*Handler).listMessageMoveTasks},
	}
}
