package service

// Limits are the server-wide bounds of SPEC §2; every one is configurable.
type Limits struct {
	MaxReceiveMessages   int
	MaxWaitSeconds       int
	MaxVisibilitySeconds int
	MaxDelaySeconds      int
	MaxExpirationSeconds int
	MaxReceiveCount      int
	MaxMessageBytes      int
}

// DefaultLimits are SPEC §2's defaults.
func DefaultLimits() Limits {
	return Limits{
		MaxReceiveMessages:   1024,
		MaxWaitSeconds:       3600,
		MaxVisibilitySeconds: 43200,
		MaxDelaySeconds:      43200,
		MaxExpirationSeconds: 1209600,
		MaxReceiveCount:      1024,
		MaxMessageBytes:      1048576,
	}
}

const (
	// MaxBatchMessages is the most messages one batch send may carry.
	MaxBatchMessages = 1000
	// MaxReceiptHandles is the most handles one settle request may carry.
	MaxReceiptHandles = 1024
	maxTags           = 32
	maxTagValueBytes  = 1024
	maxMessageIDLen   = 128
	maxQueueNameBytes = 256
	maxDedupWindow    = 43200
	maxListLimit      = 1000
)
