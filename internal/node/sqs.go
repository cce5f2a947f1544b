package node

import (
	"errors"
	"net/netip"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/handlers"
	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/sqs"
	"github.com/skipq/skipq/internal/sqs/sqsstate"
)

// SQSConfig configures the SQS-compatible endpoint (docs/SQS.md#settings).
type SQSConfig struct {
	Enabled    bool
	URL        string
	Region     string
	MasterKey  string // base64, at least 32 bytes
	TrustProxy bool
}

// bind defines the SQS settings' flags with Config.bind's helpers.
func (c *SQSConfig) bind(str func(*string, string, string), boolean func(*bool, string, string)) {
	boolean(&c.Enabled, "sqs", "serve the SQS-compatible endpoint")
	str(&c.URL, "sqs-url", "fixed base of SQS queue URLs; default where the caller reached the node")
	str(&c.Region, "sqs-region", "region in ARNs of unsigned SQS requests")
	str(&c.MasterKey, "sigv4-master-key", "base64 of at least 32 random bytes; derives SQS secrets (prefer the variable: flags show in ps)")
	boolean(&c.TrustProxy, "trust-proxy", "build SQS queue URLs from X-Forwarded-Proto and X-Forwarded-Host sent by a SKIPQ_TRUSTED_PROXIES proxy")
}

// validate checks the SQS settings; trusted are SKIPQ_TRUSTED_PROXIES.
func (c SQSConfig) validate(trusted []string) error {
	if c.TrustProxy && len(trusted) == 0 {
		// Forwarded headers are believed only from the proxies listed
		// there (one rule with X-Forwarded-For), so alone it would do
		// nothing; before that rule it believed any client.
		return errors.New("SKIPQ_TRUST_PROXY needs SKIPQ_TRUSTED_PROXIES: X-Forwarded-Proto and X-Forwarded-Host are believed only from the proxies it lists")
	}
	if c.MasterKey == "" {
		return nil
	}
	_, err := sqs.ParseMasterKey(c.MasterKey)
	return err
}

// sqsEndpoint is the node's SQS endpoint, nil when SKIPQ_SQS is false;
// state is the node's SQS state, keys its API keys, requestBytes its
// budget of request bytes in flight.
func (c Config) sqsEndpoint(svc *service.Service, state *sqsstate.State, keys *auth.Keys, requestBytes *service.BodyBudget) handlers.SQSEndpoint {
	if !c.SQS.Enabled {
		return nil
	}
	var key []byte
	if c.SQS.MasterKey != "" {
		key, _ = sqs.ParseMasterKey(c.SQS.MasterKey) // validated at start
	}
	var forwarders []netip.Prefix
	if c.SQS.TrustProxy {
		forwarders = c.trustedProxyPrefixes()
	}
	return sqs.New(svc, state, sqs.Config{AuthOff: c.Auth == "off", Keys: keys, MasterKey: key, Region: c.SQS.Region,
		URL: c.SQS.URL, ForwardedBy: forwarders, MaxRequestBytes: c.MaxRequestBytes,
		RequestBytes: requestBytes})
}
