package kubemq

import (
	"runtime/debug"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// observeUnary and observeStream time every call for the node's metrics
// (outermost, so refusals of auth and limits count too), and turn a panic
// in a call into INTERNAL for that call alone: grpc-go would let it end
// the node. observeUnary is deferred by the unary handlers
// (admittingMethods) with the call's start and its error.
func (s *Server) observeUnary(method string, start time.Time, err *error) {
	if p := recover(); p != nil {
		*err = s.panicked(method, p)
	}
	s.observe(method, *err, start)
}

func (s *Server) observeStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			err = s.panicked(info.FullMethod, p)
		}
		s.observe(info.FullMethod, err, start)
	}()
	return handler(srv, ss)
}

func (s *Server) observe(method string, err error, start time.Time) {
	if s.cfg.Observe != nil {
		s.cfg.Observe(method, status.Code(err), time.Since(start))
	}
}

func (s *Server) panicked(method string, p any) error {
	s.cfg.Log.Error("kubemq: a call panicked", "method", method, "panic", p, "stack", string(debug.Stack()))
	return status.Error(codes.Internal, "internal error")
}
