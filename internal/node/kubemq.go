package node

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/handlers"
	"github.com/skipq/skipq/internal/kubemq"
	"github.com/skipq/skipq/internal/metrics"
	"github.com/skipq/skipq/internal/service"
)

// KubeMQConfig configures the KubeMQ-compatible gRPC endpoint.
type KubeMQConfig struct {
	Addr    string // "" = off
	TLSCert string // PEM files; both or neither
	TLSKey  string
}

// bind defines the KubeMQ settings' flags with Config.bind's helpers.
func (c *KubeMQConfig) bind(str func(*string, string, string)) {
	str(&c.Addr, "kubemq-addr", "address of the KubeMQ-compatible gRPC endpoint (queues), e.g. :50000; empty = off")
	str(&c.TLSCert, "kubemq-tls-cert", "PEM certificate chain for the KubeMQ endpoint's TLS; empty = plaintext")
	str(&c.TLSKey, "kubemq-tls-key", "PEM private key for the KubeMQ endpoint's TLS")
}

// validate checks the KubeMQ settings: TLS needs both files, readable.
func (c KubeMQConfig) validate() error {
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("SKIPQ_KUBEMQ_TLS_CERT and SKIPQ_KUBEMQ_TLS_KEY go together")
	}
	_, err := c.tlsConfig()
	return err
}

func (c KubeMQConfig) tlsConfig() (*tls.Config, error) {
	if c.TLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// kubemqEndpoint is the node's KubeMQ endpoint, nil when SKIPQ_KUBEMQ_ADDR
// is empty or the node serves no API.
func (c Config) kubemqEndpoint(svc *service.Service, keys *auth.Keys, limiters *handlers.Limiters, requestBytes *service.BodyBudget, m *metrics.Metrics, log *slog.Logger) *kubemq.Server {
	if c.KubeMQ.Addr == "" || !c.Role.ServesAPI() {
		return nil
	}
	tlsConfig, _ := c.KubeMQ.tlsConfig() // validated at start
	return kubemq.New(svc, kubemq.Config{AuthOff: c.Auth == "off", Keys: keys, Limiters: limiters, TLS: tlsConfig,
		RequestBytes: requestBytes, Log: log, Observe: func(method string, code codes.Code, d time.Duration) {
			m.ObserveKubeMQCall(method, code.String(), d)
		}})
}
