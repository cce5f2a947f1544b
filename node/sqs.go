package node

import (
	"fmt"
	"strconv"

	"github.com/skipq/skipq/handlers"
	"github.com/skipq/skipq/service"
	"github.com/skipq/skipq/sqs"
)

// SQSConfig configures the SQS-compatible endpoint (SPEC §11.15).
type SQSConfig struct {
	Enabled    bool
	URL        string
	Region     string
	MasterKey  string // base64, at least 32 bytes
	TrustProxy bool
}

func (c *SQSConfig) vars() []envVar {
	boolVar := func(p *bool) (func(string) error, func() string) {
		return func(v string) error {
				b, err := strconv.ParseBool(v)
				if err != nil {
					return fmt.Errorf("%q is not a boolean", v)
				}
				*p = b
				return nil
			}, func() string {
				return strconv.FormatBool(*p)
			}
	}
	str := func(p *string) (func(string) error, func() string) {
		return func(v string) error { *p = v; return nil }, func() string { return *p }
	}
	var vs []envVar
	add := func(env, flagName, usage string, set func(string) error, get func() string) {
		vs = append(vs, envVar{env, flagName, usage, set, get})
	}
	s, g := boolVar(&c.Enabled)
	add("SKIPQ_SQS", "sqs", "serve the SQS-compatible endpoint (true/false)", s, g)
	s, g = str(&c.URL)
	add("SKIPQ_SQS_URL", "sqs-url", "fixed base of SQS queue URLs; default where the caller reached the node", s, g)
	s, g = str(&c.Region)
	add("SKIPQ_SQS_REGION", "sqs-region", "region in ARNs of unsigned SQS requests", s, g)
	s, g = str(&c.MasterKey)
	add("SKIPQ_SIGV4_MASTER_KEY", "sigv4-master-key", "base64 of at least 32 random bytes; derives SQS secrets (prefer the variable: flags show in ps)", s, g)
	s, g = boolVar(&c.TrustProxy)
	add("SKIPQ_TRUST_PROXY", "trust-proxy", "honour X-Forwarded-Proto and X-Forwarded-Host in SQS queue URLs (true/false)", s, g)
	return vs
}

func (c SQSConfig) validate() error {
	if c.MasterKey == "" {
		return nil
	}
	_, err := sqs.ParseMasterKey(c.MasterKey)
	return err
}

// sqsEndpoint is the node's SQS endpoint, nil when SKIPQ_SQS is false.
func (c Config) sqsEndpoint(svc *service.Service) handlers.SQSEndpoint {
	if !c.SQS.Enabled {
		return nil
	}
	var key []byte
	if c.SQS.MasterKey != "" {
		key, _ = sqs.ParseMasterKey(c.SQS.MasterKey) // validated at start
	}
	return sqs.New(svc, sqs.Config{AuthOff: c.Auth == "off", MasterKey: key, Region: c.SQS.Region,
		URL: c.SQS.URL, TrustProxy: c.SQS.TrustProxy, MaxRequestBytes: c.MaxRequestBytes})
}
