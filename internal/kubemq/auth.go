package kubemq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/handlers"
	"github.com/skipq/skipq/internal/kubemq/kubemqpb"
	"github.com/skipq/skipq/internal/service"
)

// identity is who a call acts as, as over HTTP: a tenant and a role rank.
type identity struct {
	tenant string
	role   int
	keyID  int64 // 0 with auth off
}

var (
	roleRead  = auth.RoleRank("read")
	roleWrite = auth.RoleRank("write")
	roleAdmin = auth.RoleRank("admin")
)

// methodRoles is the least role each served RPC needs; a receive that
// takes messages (not a peek) and the management queries check more in
// their handlers. Ping and the unserved RPCs need no credentials.
var methodRoles = map[string]int{
	kubemqpb.Kubemq_SendQueueMessage_FullMethodName:       roleWrite,
	kubemqpb.Kubemq_SendQueueMessagesBatch_FullMethodName: roleWrite,
	kubemqpb.Kubemq_QueuesUpstream_FullMethodName:         roleWrite,
	kubemqpb.Kubemq_ReceiveQueueMessages_FullMethodName:   roleRead,
	kubemqpb.Kubemq_AckAllQueueMessages_FullMethodName:    roleWrite,
	kubemqpb.Kubemq_StreamQueueMessage_FullMethodName:     roleWrite,
	kubemqpb.Kubemq_QueuesDownstream_FullMethodName:       roleWrite,
	kubemqpb.Kubemq_QueuesInfo_FullMethodName:             roleRead,
	kubemqpb.Kubemq_SendRequest_FullMethodName:            roleRead,
}

type identityKey struct{}

// identityOf is the call's identity; authUnary and authStream set it on
// every call that needs one.
func identityOf(ctx context.Context) identity {
	id, _ := ctx.Value(identityKey{}).(identity)
	return id
}

// requireRole answers PERMISSION_DENIED unless the caller's role is at
// least min.
func requireRole(ctx context.Context, min int) error {
	if id := identityOf(ctx); id.role < min {
		return status.Errorf(codes.PermissionDenied, "this call needs a key of role %s or above; this one's is %s",
			auth.RoleName(min), auth.RoleName(id.role))
	}
	return nil
}

// admittingMethods is desc with each unary method's handler made to admit
// the call (admit) before it reads the request. grpc-go hands a unary
// handler its request still unread (dec), but the generated handlers read
// it before they run the interceptors: an interceptor that refused an
// unknown caller would do so only after holding its message, of up to the
// size limit, in memory. Each call is also observed (observeUnary) and
// its message held in the node's budget of request bytes (holdRequest).
func (s *Server) admittingMethods(desc *grpc.ServiceDesc) *grpc.ServiceDesc {
	admitting := *desc
	admitting.Methods = slices.Clone(desc.Methods)
	for i, m := range admitting.Methods {
		method := "/" + desc.ServiceName + "/" + m.MethodName
		handle := m.Handler
		admitting.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (resp any, err error) {
			defer s.observeUnary(method, time.Now(), &err)
			ctx, err = s.admit(ctx, method)
			if err != nil {
				return nil, err
			}
			release := func() {}
			defer func() { release() }()
			return handle(srv, ctx, func(req any) error {
				if err := dec(req); err != nil {
					return err
				}
				held, err := s.holdRequest(req)
				release = held
				return err
			}, nil)
		}
	}
	return &admitting
}

// holdRequest takes a message just read from the node's budget of request
// bytes and returns its release.
func (s *Server) holdRequest(req any) (func(), error) {
	m, ok := req.(proto.Message)
	if !ok {
		return func() {}, nil
	}
	release, err := s.cfg.RequestBytes.Hold(int64(proto.Size(m)))
	if err != nil {
		return func() {}, statusOf(err)
	}
	return release, nil
}

func (s *Server) authStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, err := s.admit(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	stream := &limitedStream{ServerStream: ss, s: s, ctx: ctx, limits: s.limitsOf(ctx), keyID: identityOf(ctx).keyID}
	defer stream.end()
	return handler(srv, stream)
}

// limitedStream is a call's stream with its identity in its context; each
// request read from it spends a token of the caller's rate limit, as each
// HTTP request does, and is held in the node's budget of request bytes
// until the next one is read or the call ends. The handlers read requests
// on a goroutine of their own, so the hold is kept under mu.
type limitedStream struct {
	grpc.ServerStream
	s      *Server
	ctx    context.Context
	limits handlers.CallerLimits
	keyID  int64

	mu    sync.Mutex
	held  func() // the last request's release; nil when none
	ended bool   // the call ended: a request read after it is released at once
}

func (l *limitedStream) Context() context.Context { return l.ctx }

// keep makes release (nil: none) the stream's hold and releases the one it
// replaces, or release itself once the call has ended.
func (l *limitedStream) keep(release func()) {
	l.mu.Lock()
	prev := l.held
	if l.ended {
		prev, release = release, nil
	}
	l.held = release
	l.mu.Unlock()
	if prev != nil {
		prev()
	}
}

func (l *limitedStream) end() {
	l.mu.Lock()
	prev := l.held
	l.held, l.ended = nil, true
	l.mu.Unlock()
	if prev != nil {
		prev()
	}
}

func (l *limitedStream) RecvMsg(m any) error {
	l.keep(nil)
	if err := l.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	release, err := l.s.holdRequest(m)
	if err != nil {
		return err
	}
	l.keep(release)
	if ok, wait := l.limits.Allow(l.keyID); !ok {
		return rateLimited(wait)
	}
	return nil
}

// admit authenticates a call of method (its authorization metadata: the
// API key, raw or as "Bearer <key>"), checks its role and takes a token
// of its rate limit; it returns the context that carries the identity.
func (s *Server) admit(ctx context.Context, method string) (context.Context, error) {
	min, ok := methodRoles[method]
	if !ok {
		return ctx, nil
	}
	limits := s.limitsOf(ctx)
	id, err := s.authenticate(ctx, limits)
	if err != nil {
		return ctx, err
	}
	ctx = context.WithValue(ctx, identityKey{}, id)
	if id.keyID != 0 {
		ctx = service.WithKeyID(ctx, id.keyID)
	}
	if err := requireRole(ctx, min); err != nil {
		return ctx, err
	}
	if ok, wait := limits.Allow(id.keyID); !ok {
		return ctx, rateLimited(wait)
	}
	return ctx, nil
}

// authenticate resolves the caller's key under the address's budget of
// failed authentications, as the HTTP API does: once it is spent only the
// keys the node already trusts (its cache) go on working from there.
func (s *Server) authenticate(ctx context.Context, limits handlers.CallerLimits) (identity, error) {
	if s.cfg.AuthOff {
		return identity{tenant: "default", role: roleAdmin}, nil
	}
	secret := tokenOf(ctx)
	if secret == "" {
		limits.AuthFailed()
		return identity{}, status.Error(codes.Unauthenticated, "an API key is required: authorization metadata")
	}
	if blocked, wait := limits.AuthBlocked(); blocked {
		key, ok := s.cfg.Keys.Cached(secret)
		if !ok {
			return identity{}, status.Errorf(codes.ResourceExhausted,
				"too many failed authentications from this address; retry in %s", wait.Round(time.Second))
		}
		return identityOfKey(key), nil
	}
	key, err := s.cfg.Keys.Authenticate(ctx, secret)
	if errors.Is(err, auth.ErrUnauthenticated) {
		limits.AuthFailed()
		return identity{}, status.Error(codes.Unauthenticated, "the API key is unknown or revoked")
	}
	if err != nil {
		return identity{}, statusOf(err)
	}
	return identityOfKey(key), nil
}

func identityOfKey(key auth.Key) identity {
	return identity{tenant: key.Tenant, role: auth.RoleRank(key.Role), keyID: key.ID}
}

// tokenOf is the call's API key: the SDKs send the raw token as the
// authorization metadata; "Bearer <token>" is taken too.
func tokenOf(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return ""
	}
	token := strings.TrimSpace(vals[0])
	if scheme, rest, ok := strings.Cut(token, " "); ok && strings.EqualFold(scheme, "Bearer") {
		token = strings.TrimSpace(rest)
	}
	return token
}

// limitsOf are the limits of the call's peer, by its address as HTTP
// counts a client without a key.
func (s *Server) limitsOf(ctx context.Context) handlers.CallerLimits {
	addr := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			addr = host
		}
	}
	return s.cfg.Limiters.For("ip:" + addr)
}

func rateLimited(wait time.Duration) error {
	return status.Error(codes.ResourceExhausted, fmt.Sprintf("rate limit exceeded; retry in %s", wait.Round(time.Millisecond)))
}
