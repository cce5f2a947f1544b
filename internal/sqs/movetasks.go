package sqs

import (
	"context"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"

	"github.com/skipq/skipq/internal/service"
)

// Message move tasks (docs/SQS.md#actions): the native bulk redrive of a dead-letter
// queue, run in the background by sqsstate.State.StartMoveTask.

const (
	maxMovePerSecond = 500
	maxMoveTasks     = 10
	taskHandlePrefix = "skipq-move-task:"
)

func taskHandle(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(taskHandlePrefix + strconv.FormatInt(id, 10)))
}

func taskNotFound() *apiError {
	return newError(errResourceNotFound, "The resource that you specified for the TaskHandle parameter doesn't exist.")
}

// taskID reads a TaskHandle; anything this server did not hand out is an
// unknown task.
func taskID(handle string) (int64, bool) {
	b, err := base64.RawURLEncoding.DecodeString(handle)
	if err != nil {
		return 0, false
	}
	rest, ok := strings.CutPrefix(string(b), taskHandlePrefix)
	id, err := strconv.ParseInt(rest, 10, 64)
	return id, ok && err == nil && id > 0
}

// arnParameter is the queue an ARN parameter names.
func arnParameter(name string, arn *string) (string, *apiError) {
	if arn == nil || *arn == "" {
		return "", missingParameter(name)
	}
	q, aerr := arnQueue(*arn)
	if aerr != nil {
		return "", invalidParameter("Value %s for parameter %s is invalid. Reason: not a valid SQS ARN.", *arn, name)
	}
	return q, nil
}

func sourceMissing() *apiError {
	return newError(errResourceNotFound, "The resource that you specified for the SourceArn parameter doesn't exist.")
}

// sourceNotFound maps a missing source queue onto SQS's error for it.
func sourceNotFound(err error) *apiError {
	if service.KindOf(err) == service.KindNotFound {
		return sourceMissing()
	}
	return fromService(err)
}

func (h *Handler) startMessageMoveTask(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	var in struct {
		SourceArn                    *string
		DestinationArn               *string
		MaxNumberOfMessagesPerSecond *int
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	source, aerr := arnParameter("SourceArn", in.SourceArn)
	if aerr != nil {
		return nil, aerr
	}
	var dest string
	if in.DestinationArn != nil {
		if dest, aerr = arnParameter("DestinationArn", in.DestinationArn); aerr != nil {
			return nil, aerr
		}
		if _, err := h.svc.SQSQueue(ctx, who.tenant, dest); err != nil {
			if service.KindOf(err) == service.KindNotFound {
				return nil, newError(errResourceNotFound, "The resource that you specified for the DestinationArn parameter doesn't exist.")
			}
			return nil, fromService(err)
		}
	}
	if v := in.MaxNumberOfMessagesPerSecond; v != nil && (*v < 1 || *v > maxMovePerSecond) {
		return nil, invalidParameter("Value %d for parameter MaxNumberOfMessagesPerSecond is invalid. Reason: Must be between 1 and %d.",
			*v, maxMovePerSecond)
	}
	if service.ValidQueueName(source) != "" {
		return nil, sourceMissing()
	}
	t, err := h.state.StartMoveTask(ctx, who.tenant, source, dest, in.MaxNumberOfMessagesPerSecond)
	if err != nil {
		if service.KindOf(err) == service.KindInvalid {
			return nil, invalidParameter("Value %s for parameter SourceArn is invalid. Reason: %s", *in.SourceArn, issueText(err))
		}
		return nil, sourceNotFound(err)
	}
	return map[string]string{"TaskHandle": taskHandle(t.ID)}, nil
}

// issueText is what a service validation error says about its first issue.
func issueText(err error) string {
	var e *service.Error
	if errors.As(err, &e) && len(e.Issues) > 0 {
		return "The queue " + e.Issues[0].Message + "."
	}
	return err.Error()
}

// moveTaskResult is an entry of ListMessageMoveTasks.
type moveTaskResult struct {
	TaskHandle                        string `json:",omitempty"`
	Status                            string
	SourceArn                         string
	DestinationArn                    string `json:",omitempty"`
	MaxNumberOfMessagesPerSecond      *int   `json:",omitempty"`
	ApproximateNumberOfMessagesMoved  int64
	ApproximateNumberOfMessagesToMove int64
	FailureReason                     string `json:",omitempty"`
	StartedTimestamp                  int64
}

func (h *Handler) listMessageMoveTasks(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	var in struct {
		SourceArn  *string
		MaxResults *int
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	source, aerr := arnParameter("SourceArn", in.SourceArn)
	if aerr != nil {
		return nil, aerr
	}
	limit := 1
	if v := in.MaxResults; v != nil {
		if *v < 1 || *v > maxMoveTasks {
			return nil, invalidParameter("Value %d for parameter MaxResults is invalid. Reason: Must be between 1 and %d.", *v, maxMoveTasks)
		}
		limit = *v
	}
	if service.ValidQueueName(source) != "" {
		return nil, sourceMissing()
	}
	tasks, err := h.state.ListMoveTasks(ctx, who.tenant, source, limit)
	if err != nil {
		return nil, sourceNotFound(err)
	}
	results := []moveTaskResult{}
	for _, t := range tasks {
		r := moveTaskResult{Status: t.Status, SourceArn: who.arn(source), MaxNumberOfMessagesPerSecond: t.MaxPerSecond,
			ApproximateNumberOfMessagesMoved: t.Moved, ApproximateNumberOfMessagesToMove: t.ToMove,
			FailureReason: t.FailureReason, StartedTimestamp: t.StartedAt.UnixMilli()}
		if t.Status == "RUNNING" {
			r.TaskHandle = taskHandle(t.ID)
		}
		if t.Destination != "" {
			r.DestinationArn = who.arn(t.Destination)
		}
		results = append(results, r)
	}
	return map[string]any{"Results": results}, nil
}

func (h *Handler) cancelMessageMoveTask(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	var in struct {
		TaskHandle *string
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if in.TaskHandle == nil || *in.TaskHandle == "" {
		return nil, missingParameter("TaskHandle")
	}
	id, ok := taskID(*in.TaskHandle)
	if !ok {
		return nil, taskNotFound()
	}
	t, err := h.state.CancelMoveTask(ctx, who.tenant, id)
	switch service.KindOf(err) {
	case service.KindNotFound:
		return nil, taskNotFound()
	case service.KindInvalid:
		return nil, invalidParameter("Value %s for parameter TaskHandle is invalid. Reason: Only a RUNNING task can be cancelled.", *in.TaskHandle)
	}
	if err != nil {
		return nil, fromService(err)
	}
	return map[string]int64{"ApproximateNumberOfMessagesMoved": t.Moved}, nil
}
