package sqs

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/skipq/skipq/internal/service"
)

// apiError is an SQS error (docs/SQS.md#errors): the __type shape name, the legacy
// query code sent in x-amzn-query-error, and the status.
type apiError struct {
	shape   string
	message string
	err     error // the cause, for the log
	// retryAfter is how long a throttled client should wait (Retry-After,
	// at least 1 s).
	retryAfter time.Duration
}

func (e *apiError) Error() string {
	if e.err != nil {
		return e.shape + ": " + e.message + ": " + e.err.Error()
	}
	return e.shape + ": " + e.message
}

func (e *apiError) Unwrap() error { return e.err }

// errorKind is what the table of docs/SQS.md#errors says about one shape.
type errorKind struct {
	queryCode string
	status    int
	coral     bool // namespace com.amazon.coral.service, not com.amazonaws.sqs
	receiver  bool // the server's fault
}

// Error shapes of docs/SQS.md#errors.
const (
	errQueueDoesNotExist      = "QueueDoesNotExist"
	errQueueNameExists        = "QueueNameExists"
	errReceiptHandleIsInvalid = "ReceiptHandleIsInvalid"
	errInvalidAttributeName   = "InvalidAttributeName"
	errInvalidAttributeValue  = "InvalidAttributeValue"
	errInvalidMessageContents = "InvalidMessageContents"
	errEmptyBatch             = "EmptyBatchRequest"
	errTooManyEntries         = "TooManyEntriesInBatchRequest"
	errIDsNotDistinct         = "BatchEntryIdsNotDistinct"
	errInvalidBatchEntryID    = "InvalidBatchEntryId"
	errBatchTooLong           = "BatchRequestTooLong"
	errUnsupportedOperation   = "UnsupportedOperation"
	errResourceNotFound       = "ResourceNotFoundException"
	errThrottled              = "RequestThrottled"
	errInvalidParameter       = "InvalidParameterValueException"
	errMissingParameter       = "MissingRequiredParameterException"
	errAccessDenied           = "AccessDeniedException"
	errUnknownOperation       = "UnknownOperationException"
	errSerialization          = "SerializationException"
	errMissingToken           = "MissingAuthenticationToken"
	errIncompleteSignature    = "IncompleteSignature"
	errInvalidClientTokenID   = "InvalidClientTokenId"
	errSignatureDoesNotMatch  = "SignatureDoesNotMatch"
	errRequestExpired         = "RequestExpired"
	errTooLarge               = "RequestEntityTooLarge"
	errInternal               = "InternalFailure"
	errUnavailable            = "ServiceUnavailable"
)

var errorKinds = map[string]errorKind{
	errQueueDoesNotExist:      {"AWS.SimpleQueueService.NonExistentQueue", 400, false, false},
	errQueueNameExists:        {"QueueAlreadyExists", 400, false, false},
	errReceiptHandleIsInvalid: {"ReceiptHandleIsInvalid", 404, false, false},
	errInvalidAttributeName:   {"InvalidAttributeName", 400, false, false},
	errInvalidAttributeValue:  {"InvalidAttributeValue", 400, false, false},
	errInvalidMessageContents: {"InvalidMessageContents", 400, false, false},
	errEmptyBatch:             {"AWS.SimpleQueueService.EmptyBatchRequest", 400, false, false},
	errTooManyEntries:         {"AWS.SimpleQueueService.TooManyEntriesInBatchRequest", 400, false, false},
	errIDsNotDistinct:         {"AWS.SimpleQueueService.BatchEntryIdsNotDistinct", 400, false, false},
	errInvalidBatchEntryID:    {"AWS.SimpleQueueService.InvalidBatchEntryId", 400, false, false},
	errBatchTooLong:           {"AWS.SimpleQueueService.BatchRequestTooLong", 400, false, false},
	errUnsupportedOperation:   {"AWS.SimpleQueueService.UnsupportedOperation", 400, false, false},
	errResourceNotFound:       {"ResourceNotFoundException", 404, false, false},
	errThrottled:              {"RequestThrottled", 403, false, false},
	errInvalidParameter:       {"InvalidParameterValue", 400, true, false},
	errMissingParameter:       {"MissingParameter", 400, true, false},
	errAccessDenied:           {"AccessDenied", 403, true, false},
	errUnknownOperation:       {"InvalidAction", 400, true, false},
	errSerialization:          {"MalformedInput", 400, true, false},
	errMissingToken:           {"MissingAuthenticationToken", 403, true, false},
	errIncompleteSignature:    {"IncompleteSignature", 400, true, false},
	errInvalidClientTokenID:   {"InvalidClientTokenId", 403, true, false},
	errSignatureDoesNotMatch:  {"SignatureDoesNotMatch", 403, true, false},
	errRequestExpired:         {"RequestExpired", 400, true, false},
	errTooLarge:               {"RequestEntityTooLarge", 413, true, false},
	errInternal:               {"InternalFailure", 500, true, true},
	errUnavailable:            {"ServiceUnavailable", 503, true, true},
}

func newError(shape, format string, args ...any) *apiError {
	return &apiError{shape: shape, message: fmt.Sprintf(format, args...)}
}

func throttled(wait time.Duration, message string) *apiError {
	return &apiError{shape: errThrottled, message: message, retryAfter: wait}
}

func invalidParameter(format string, args ...any) *apiError {
	return newError(errInvalidParameter, format, args...)
}

func missingParameter(name string) *apiError {
	return newError(errMissingParameter, "The request must contain the parameter %s.", name)
}

func queueDoesNotExist() *apiError {
	return newError(errQueueDoesNotExist, "The specified queue does not exist.")
}

func invalidReceiptHandle(h string) *apiError {
	return newError(errReceiptHandleIsInvalid, "The input receipt handle %q is not a valid receipt handle.", h)
}

// fromService maps a service error onto the SQS error a client expects.
func fromService(err error) *apiError {
	var a *apiError
	if errors.As(err, &a) {
		return a
	}
	var e *service.Error
	if !errors.As(err, &e) {
		return &apiError{shape: errInternal, message: "internal error; see the server log for this request id", err: err}
	}
	switch e.Kind {
	case service.KindNotFound:
		return &apiError{shape: errQueueDoesNotExist, message: "The specified queue does not exist.", err: err}
	case service.KindInvalid, service.KindTooLarge, service.KindIdempotencyConflict, service.KindNotDeadLettered:
		return &apiError{shape: errInvalidParameter, message: e.Message}
	case service.KindReceiptStale:
		return &apiError{shape: errReceiptHandleIsInvalid, message: e.Message}
	case service.KindUnavailable:
		return &apiError{shape: errUnavailable, message: e.Message, err: err}
	case service.KindTooManyRequests:
		return &apiError{shape: errThrottled, message: e.Message}
	}
	return &apiError{shape: errInternal, message: "internal error; see the server log for this request id", err: err}
}

func fromServiceOrNil(err error) *apiError {
	if err == nil {
		return nil
	}
	return fromService(err)
}

// status, query code and __type of an error.
func (e *apiError) wire() (status int, queryCode, typ, fault string) {
	k, ok := errorKinds[e.shape]
	if !ok {
		k = errorKinds[errInternal]
	}
	ns := "com.amazonaws.sqs#"
	if k.coral {
		ns = "com.amazon.coral.service#"
	}
	fault = "Sender"
	if k.receiver {
		fault = "Receiver"
	}
	return k.status, k.queryCode, ns + e.shape, fault
}

// retryable errors carry Retry-After.
func (e *apiError) retryable() bool {
	s, _, _, _ := e.wire()
	return s == http.StatusServiceUnavailable || e.shape == errThrottled
}
