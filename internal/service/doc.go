// Package service holds skipq's queue semantics: validation, send, claim,
// settle, moves and long-poll waiting. It knows nothing about HTTP.
package service
