// Package kubemq serves KubeMQ's queue API over gRPC (service
// kubemq.kubemq, kubemqpb) as a thin translation over package service:
// the same sends, claims, settles, policies, dead-lettering, FIFO groups,
// wake-ups, API keys and limits as the native HTTP API. Validation failures
// answer in the response body with KubeMQ's "Error 1xx: …" texts and gRPC
// status OK, as KubeMQ does; the server's own state (database away, auth,
// limits) answers with a gRPC status.
package kubemq

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/handlers"
	"github.com/skipq/skipq/internal/kubemq/kubemqpb"
	"github.com/skipq/skipq/internal/service"
)

// ServerVersion is the version Ping reports: the KubeMQ server release whose
// queue API this endpoint speaks. The Go SDK warns (only) outside 2.2–2.99.
const ServerVersion = "2.4.0"

// MaxRequestBytes is the largest gRPC message the endpoint reads, as a
// KubeMQ server's default body limit, unless the node's whole budget of
// request bytes in flight is smaller (Config.RequestBytes).
const MaxRequestBytes = 100 << 20

// Config is what the endpoint needs from the node.
type Config struct {
	AuthOff bool
	Keys    *auth.Keys // nil only with AuthOff
	// Limiters are the node's per-caller buckets, shared with HTTP.
	Limiters *handlers.Limiters
	// RequestBytes is the node's budget of request bytes in flight, shared
	// with HTTP: each message read takes its size from it until its call
	// (or, in a stream, the next message) is done. Nil bounds nothing.
	RequestBytes *service.BodyBudget
	// TLS, when set, serves TLS; nil serves plaintext.
	TLS *tls.Config
	Log *slog.Logger
	// Observe, when set, is called once per finished call with its full
	// method name, its status code and how long it took.
	Observe func(method string, code codes.Code, d time.Duration)
}

// Server is a node's KubeMQ endpoint.
type Server struct {
	svc     *service.Service
	cfg     Config
	grpc    *grpc.Server
	started time.Time
	host    string

	// closing is closed when the node shuts down: open downstream calls
	// release what they hold, answer CloseByServer and end.
	closing   chan struct{}
	closeOnce sync.Once
}

// New returns the endpoint; Serve starts it.
func New(svc *service.Service, cfg Config) *Server {
	host, _ := os.Hostname()
	s := &Server{svc: svc, cfg: cfg, started: time.Now(), host: host, closing: make(chan struct{})}
	opts := []grpc.ServerOption{
		// grpc-go refuses a longer message from its length prefix, unread.
		grpc.MaxRecvMsgSize(int(min(MaxRequestBytes, cfg.RequestBytes.Size()))),
		// The Go SDK pings every 10 s even without calls in flight; grpc-go
		// would answer pings more often than every 5 minutes with GOAWAY.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		// Unary calls are observed and admitted by admittingMethods, which
		// runs before the request is read; no unary interceptor would.
		grpc.ChainStreamInterceptor(s.observeStream, s.authStream),
	}
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	s.grpc = grpc.NewServer(opts...)
	s.grpc.RegisterService(s.admittingMethods(&kubemqpb.Kubemq_ServiceDesc), &api{s: s})
	return s
}

// Serve serves on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.grpc.Serve(ln) }

// Shutdown ends the downstream calls (CloseByServer) and drains the rest
// until ctx ends, then cuts what is left.
func (s *Server) Shutdown(ctx context.Context) {
	s.closeOnce.Do(func() { close(s.closing) })
	done := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
	}
}

// api implements the generated service; the RPCs skipq does not serve fall
// through to unserved.
type api struct {
	kubemqpb.UnimplementedKubemqServer
	s *Server
}

// errNotServed answers every RPC outside the queues API.
var errNotServed = status.Error(codes.Unimplemented, "skipq serves the KubeMQ queues API only")

func (*api) SendEvent(context.Context, *kubemqpb.Event) (*kubemqpb.Result, error) {
	return nil, errNotServed
}

func (*api) SendEventsStream(grpc.BidiStreamingServer[kubemqpb.Event, kubemqpb.Result]) error {
	return errNotServed
}

func (*api) SubscribeToEvents(*kubemqpb.Subscribe, grpc.ServerStreamingServer[kubemqpb.EventReceive]) error {
	return errNotServed
}

func (*api) SubscribeToRequests(*kubemqpb.Subscribe, grpc.ServerStreamingServer[kubemqpb.Request]) error {
	return errNotServed
}

func (*api) SendResponse(context.Context, *kubemqpb.Response) (*kubemqpb.Empty, error) {
	return nil, errNotServed
}

// Ping answers without credentials (kubemq-js pings without them).
func (a *api) Ping(context.Context, *kubemqpb.Empty) (*kubemqpb.PingResult, error) {
	return &kubemqpb.PingResult{Host: a.s.host, Version: ServerVersion, ServerStartTime: a.s.started.Unix(),
		ServerUpTimeSeconds: int64(time.Since(a.s.started).Seconds())}, nil
}
