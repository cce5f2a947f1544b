package sqs

import (
	"crypto/rand"
	"encoding/base32"
	"errors"
)

var errMasterKey = errors.New("SKIPQ_SIGV4_MASTER_KEY must be base64 of at least 32 random bytes (e.g. openssl rand -base64 32)")

// NewAccessKeyID is a fresh access key id: SKQ and 17 characters of base32
// (85 random bits).
func NewAccessKeyID() string {
	b := make([]byte, 11)
	_, _ = rand.Read(b)
	return "SKQ" + base32.StdEncoding.EncodeToString(b)[:17]
}
