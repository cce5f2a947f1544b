package kubemq

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// observeUnary and observeStream time every call for the node's metrics
// (outermost, so refusals of auth and limits count too).
func (s *Server) observeUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	if s.cfg.Observe != nil {
		s.cfg.Observe(info.FullMethod, status.Code(err), time.Since(start))
	}
	return resp, err
}

func (s *Server) observeStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	err := handler(srv, ss)
	if s.cfg.Observe != nil {
		s.cfg.Observe(info.FullMethod, status.Code(err), time.Since(start))
	}
	return err
}
