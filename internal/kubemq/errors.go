package kubemq

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/skipq/skipq/internal/service"
)

// KubeMQ's in-band error texts, as its server words them (clients show
// them to people; none parses more than the code).
const (
	errClientID         = "Error 101: invalid clientID value, cannot be empty"
	errEmptyMessage     = "Error 110: invalid message, cannot be empty"
	errQueueName        = "Error 120: invalid queue name value, cannot be empty, contains wildcards ,white spaces and end with dot"
	errMaxMessages      = "Error 122: max messages should be between 1 and max message setting in kubemq config  "
	errAckCurrent       = "Error 123: cannot ack the current message"
	errNoMessageToAck   = "Error 124: no active message to ack"
	errAckSequence      = "Error 125: ack sequence cannot be 0 or negative"
	errNoMessageToSend  = "Error 126: no active message to send"
	errVisibility       = "Error 127: invalid visibility time, cannot be negative or exceed setting in kubemq config"
	errAlreadyActive    = "Error 128: subscription to queue is already active"
	errVisibilityExpiry = "Error 129: current visibility timer expired"
	errSendFailed       = "Error 130: error during send message to queue"
	errInvalidMessage   = "Error 131: invalid queue message"
	errStreamType       = "Error 132: invalid stream queue messages request type"
	errExpiration       = "Error 133: invalid expiration seconds, exceed max expiration seconds setting in kubemq config"
	errMaxReceiveCount  = "Error 134: invalid max received count, cannot be negative or exceed max receive count setting in kubemq config"
	errDelay            = "Error 135: invalid delay seconds, exceed max delay seconds setting in kubemq config"
	errWaitTimeout      = "Error 136: invalid wait timeout, value cannot be negative or exceed max wait timeout seconds setting in kubemq config"
	errNoMessageReject  = "Error 137: no active message to reject"
	errNoNewMessage     = "Error 138: no new message in queue, wait time expired"
	errMaxItems         = "Error 139: invalid max items value, must be between 1 and max message setting in kubemq config"
	errWaitMillis       = "Error 140: invalid wait timeout, must be at least 1000 milliseconds and at most the max wait timeout setting"
)

// errShuttingDown ends the calls that wait on their clients when the node
// shuts down (a downstream call answers CloseByServer instead).
var errShuttingDown = status.Error(codes.Unavailable, "the node is shutting down")

// inBand is a refusal KubeMQ answers in the response body (IsError and
// Error) with gRPC status OK.
type inBand struct{ text string }

func (e *inBand) Error() string { return e.text }

func refuse(text string) error { return &inBand{text: text} }

// refuseDetail is a refusal whose text names what skipq refused, after the
// KubeMQ text: "Error 131: invalid queue message: tags: …".
func refuseDetail(text string, err error) error {
	var se *service.Error
	if errors.As(err, &se) {
		return &inBand{text: text + ": " + se.Message}
	}
	return &inBand{text: text}
}

// answer splits err into the in-band error text of a response and the
// gRPC status error of the call: one of them is set, or neither.
func answer(err error) (text string, callErr error) {
	if err == nil {
		return "", nil
	}
	var ib *inBand
	if errors.As(err, &ib) {
		return ib.text, nil
	}
	return "", statusOf(err)
}

// statusOf is the gRPC status of an error that is not in-band: the
// service's kinds as the HTTP API maps them to statuses, a status error
// as it is.
func statusOf(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, context.Canceled) {
		return status.Error(codes.Canceled, "the call was cancelled")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return status.Error(codes.DeadlineExceeded, "the call's deadline passed")
	}
	var se *service.Error
	if !errors.As(err, &se) {
		return status.Error(codes.Internal, "internal error")
	}
	switch se.Kind {
	case service.KindInvalid, service.KindQueueTypeMismatch, service.KindTooLarge:
		return status.Error(codes.InvalidArgument, se.Message)
	case service.KindNotFound:
		return status.Error(codes.NotFound, se.Message)
	case service.KindReceiptStale, service.KindNotDeadLettered, service.KindIdempotencyConflict:
		return status.Error(codes.FailedPrecondition, se.Message)
	case service.KindUnavailable:
		return status.Error(codes.Unavailable, se.Message)
	case service.KindTooManyRequests:
		return status.Error(codes.ResourceExhausted, se.Message)
	default:
		return status.Error(codes.Internal, "internal error")
	}
}

// sendRefusal is the in-band answer for a send the service refused: its
// validation as KubeMQ's "invalid queue message", anything else a status.
func sendRefusal(err error) error {
	switch service.KindOf(err) {
	case service.KindInvalid, service.KindTooLarge:
		return refuseDetail(errInvalidMessage, err)
	case service.KindIdempotencyConflict, service.KindQueueTypeMismatch:
		return refuseDetail(errSendFailed, err)
	default:
		return err
	}
}
