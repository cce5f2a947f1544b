package service

import (
	"context"
	"math"

	"github.com/skipq/skipq/internal/db"
)

// Limits are the server-wide bounds of docs/API.md#limits; every one is configurable.
type Limits struct {
	MaxReceiveMessages   int
	MaxWaitSeconds       int
	MaxVisibilitySeconds int
	MaxDelaySeconds      int
	MaxExpirationSeconds int
	MaxReceiveCount      int
	MaxMessageBytes      int
	// MaxResponseBytes is a receive's (or peek's) answer budget: it stops
	// taking messages when the estimated answer would pass it, but always
	// returns at least one message (skipq.message_claim,
	// internal/migrations/current/functions/message_claim.sql).
	MaxResponseBytes int
	// MaxWaiters is how many receives may wait (long-poll) on this node at
	// once; one more that would wait is refused with ErrTooManyWaiters.
	MaxWaiters int
}

// DefaultLimits are the default limits of docs/API.md#limits.
func DefaultLimits() Limits {
	return Limits{
		MaxReceiveMessages:   1024,
		MaxWaitSeconds:       3600,
		MaxVisibilitySeconds: 43200,
		MaxDelaySeconds:      43200,
		MaxExpirationSeconds: 1209600,
		MaxReceiveCount:      1024,
		MaxMessageBytes:      1048576,
		MaxResponseBytes:     16 << 20,
		MaxWaiters:           DefaultMaxWaiters,
	}
}

// DefaultMaxWaiters is sized by measurement (docs/OPERATIONS.md): a waiting
// receive costs a node about 33 KB (two goroutines, the connection's
// buffers, the request), so 1,500 of them take an idle node from 20 MB to
// 72 MB RSS, leaving room under the 100 MB target of docs/PERFORMANCE.md for a receive at the
// response budget; and it is above the 1,000 waiting long-polls docs/PERFORMANCE.md
// requires.
const DefaultMaxWaiters = 1500

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

// PublishSQLLimits writes the limits the SQL API enforces (skipq.sql_limits,
// internal/migrations/00006) from this service's Limits, so skipq.send refuses what
// the HTTP API refuses. It reports whether any value changed. Only the
// schema owner (or a role granted INSERT, UPDATE on the table) may write
// them: a producer must not raise its own limits.
func (s *Service) PublishSQLLimits(ctx context.Context) (changed bool, err error) {
	n, err := s.q.SQLLimitsPublish(ctx, db.SQLLimitsPublishParams{
		MaxMessageBytes:      sqlLimit(s.limits.MaxMessageBytes),
		MaxDelaySeconds:      sqlLimit(s.limits.MaxDelaySeconds),
		MaxExpirationSeconds: sqlLimit(s.limits.MaxExpirationSeconds),
		MaxReceiveCount:      sqlLimit(s.limits.MaxReceiveCount),
	})
	return n > 0, fromDB("publish the SQL limits", err)
}

// sqlLimit fits a limit into the table's integer column. In SQL a larger
// limit means the same as MaxInt32: skipq.send's seconds and counts are
// integers, and a bytea holds at most 1 GB.
func sqlLimit(v int) int32 {
	return int32(min(v, math.MaxInt32))
}
