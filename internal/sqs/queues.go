package sqs

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/skipq/skipq/internal/service"
)

// Defaults of a queue created over SQS (docs/SQS.md#actions).
const (
	defaultVisibility     = 30
	defaultRetention      = 345600
	defaultMaxMessageSize = 1048576
	maxRetention          = 1209600
	maxQueueTags          = 50
)

// attrs is a request's Attributes map: values are strings on the wire,
// but JSON numbers and booleans are accepted too.
type attrs map[string]json.RawMessage

func (a attrs) strings() map[string]string {
	out := make(map[string]string, len(a))
	for k, raw := range a {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			s = string(raw)
		}
		out[k] = s
	}
	return out
}

// verbatimAttributes are stored as given and not enforced (docs/SQS.md#actions).
var verbatimAttributes = []string{"Policy", "RedriveAllowPolicy", "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "SqsManagedSseEnabled"}

// queueChange is a parsed Attributes map.
type queueChange struct {
	settings service.QueueSettings
	extras   service.SQSExtras
	verbatim map[string]string
}

func invalidAttributeValue(name string) *apiError {
	return newError(errInvalidAttributeValue, "Invalid value for the parameter %s.", name)
}

// parseAttributes validates queue attributes for CreateQueue (creating) or
// SetQueueAttributes.
func (h *Handler) parseAttributes(ctx context.Context, who *caller, queue string, in map[string]string, creating, fifo bool) (queueChange, *apiError) {
	ch := queueChange{verbatim: map[string]string{}}
	intIn := func(name, v string, lo, hi int) (*int, *apiError) {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < lo || n > hi {
			return nil, invalidAttributeValue(name)
		}
		return &n, nil
	}
	names := slices.Sorted(maps.Keys(in))
	for _, name := range names {
		v := in[name]
		var err *apiError
		switch name {
		case "VisibilityTimeout":
			ch.settings.VisibilitySeconds, err = intIn(name, v, 0, 43200)
		case "DelaySeconds":
			ch.settings.DelaySeconds, err = intIn(name, v, 0, 900)
		case "ReceiveMessageWaitTimeSeconds":
			ch.settings.ReceiveWaitSeconds, err = intIn(name, v, 0, 20)
		case "MessageRetentionPeriod":
			ch.settings.ExpirationSeconds, err = intIn(name, v, 60, min(maxRetention, h.svc.Limits().MaxExpirationSeconds))
		case "MaximumMessageSize":
			ch.extras.MaxMessageBytes, err = intIn(name, v, 1024, defaultMaxMessageSize)
		case "RedrivePolicy":
			err = h.parseRedrivePolicy(ctx, who, queue, v, fifo, &ch.settings)
		case "FifoQueue":
			switch {
			case !creating:
				err = newError(errInvalidAttributeValue, "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported.")
			case !isBool(v):
				err = invalidAttributeValue(name)
			default:
				ch.settings.FIFO = &fifo
			}
		case "ContentBasedDeduplication":
			if !fifo {
				err = newError(errInvalidAttributeName, "Unknown Attribute %s.", name)
			} else if !isBool(v) {
				err = invalidAttributeValue(name)
			}
			on := strings.EqualFold(v, "true")
			ch.settings.ContentBasedDeduplication = &on
		case "DeduplicationScope", "FifoThroughputLimit":
			allowed := map[string][]string{"DeduplicationScope": {"queue", "messageGroup"},
				"FifoThroughputLimit": {"perQueue", "perMessageGroupId"}}[name]
			if !fifo {
				err = newError(errInvalidAttributeName, "Unknown Attribute %s.", name)
			} else if !slices.Contains(allowed, v) {
				err = invalidAttributeValue(name)
			}
			ch.verbatim[name] = v
		default:
			if !slices.Contains(verbatimAttributes, name) {
				err = newError(errInvalidAttributeName, "Unknown Attribute %s.", name)
			}
			ch.verbatim[name] = v
		}
		if err != nil {
			return queueChange{}, err
		}
	}
	// Stored as given, as jsonb strings: text Postgres cannot hold is refused.
	if service.CheckTexts("Attributes", ch.verbatim) != nil {
		return queueChange{}, newError(errInvalidAttributeValue, "Attribute values must be valid UTF-8 without NUL characters.")
	}
	return ch, nil
}

// parseRedrivePolicy reads {"deadLetterTargetArn", "maxReceiveCount"};
// "" removes the policy.
func (h *Handler) parseRedrivePolicy(ctx context.Context, who *caller, queue, v string, fifo bool, s *service.QueueSettings) *apiError {
	none, zero := "", 0
	if strings.TrimSpace(v) == "" {
		s.DeadLetterQueue, s.MaxReceiveCount = &none, &zero
		return nil
	}
	var p struct {
		Target *string         `json:"deadLetterTargetArn"`
		Max    json.RawMessage `json:"maxReceiveCount"`
	}
	if json.Unmarshal([]byte(v), &p) != nil || p.Target == nil || p.Max == nil {
		return invalidParameter("Value %s for parameter RedrivePolicy is invalid. Reason: Redrive policy is not a valid JSON map "+
			"with deadLetterTargetArn and maxReceiveCount.", v)
	}
	var maxStr string
	if json.Unmarshal(p.Max, &maxStr) != nil {
		maxStr = string(p.Max)
	}
	n, err := strconv.Atoi(maxStr)
	if err != nil || n < 1 || n > 1000 {
		return invalidParameter("Value %s for parameter RedrivePolicy is invalid. Reason: Invalid value for maxReceiveCount: %s, "+
			"valid values are from 1 to 1000 both inclusive.", v, maxStr)
	}
	dlq, aerr := arnQueue(*p.Target)
	if aerr != nil {
		return aerr
	}
	if dlq == queue {
		return invalidParameter("Value %s for parameter RedrivePolicy is invalid. Reason: A queue cannot be its own dead-letter queue.", v)
	}
	target, err := h.svc.SQSQueue(ctx, who.tenant, dlq)
	if err != nil {
		if service.KindOf(err) == service.KindNotFound {
			return invalidParameter("Value %s for parameter RedrivePolicy is invalid. Reason: Dead letter target does not exist.", v)
		}
		return fromService(err)
	}
	if target.FIFO != fifo {
		return invalidParameter("Value %s for parameter RedrivePolicy is invalid. Reason: Dead-letter queue must be same type of queue as the source.", v)
	}
	s.DeadLetterQueue, s.MaxReceiveCount = &dlq, &n
	return nil
}

func isBool(v string) bool {
	return strings.EqualFold(v, "true") || strings.EqualFold(v, "false")
}

// arnQueue is the queue name of an SQS ARN; partition, region and account
// are not checked (docs/SQS.md#queue-urls-accounts-and-arns).
func arnQueue(arn string) (string, *apiError) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[5] == "" {
		return "", invalidParameter("Value %s for parameter deadLetterTargetArn is invalid. Reason: not a valid SQS ARN.", arn)
	}
	return parts[5], nil
}

// queueAttributes is every attribute GetQueueAttributes can return.
func (h *Handler) queueAttributes(ctx context.Context, who *caller, q service.SQSQueue) (map[string]string, *apiError) {
	full, err := h.svc.GetQueue(ctx, who.tenant, q.Name)
	if err != nil {
		return nil, fromService(err)
	}
	itoa := strconv.Itoa
	out := map[string]string{
		"QueueArn":                              who.arn(q.Name),
		"ApproximateNumberOfMessages":           strconv.FormatInt(full.Stats.Available, 10),
		"ApproximateNumberOfMessagesNotVisible": strconv.FormatInt(full.Stats.InFlight, 10),
		"ApproximateNumberOfMessagesDelayed":    strconv.FormatInt(full.Stats.Delayed, 10),
		"CreatedTimestamp":                      strconv.FormatInt(q.CreatedAt.Unix(), 10),
		"LastModifiedTimestamp":                 strconv.FormatInt(q.UpdatedAt.Unix(), 10),
		"VisibilityTimeout":                     itoa(full.VisibilitySeconds),
		"DelaySeconds":                          itoa(full.DelaySeconds),
		"ReceiveMessageWaitTimeSeconds":         itoa(min(full.ReceiveWaitSeconds, 20)),
		"MessageRetentionPeriod":                itoa(retention(full.ExpirationSeconds)),
		"MaximumMessageSize":                    itoa(maxMessageSize(q)),
		"SqsManagedSseEnabled":                  "false",
	}
	for k, v := range q.Attributes {
		out[k] = v
	}
	if full.FIFO {
		out["FifoQueue"] = "true"
		out["ContentBasedDeduplication"] = strconv.FormatBool(full.ContentBasedDeduplication)
		out["DeduplicationScope"] = cmp.Or(q.Attributes["DeduplicationScope"], "queue")
		out["FifoThroughputLimit"] = cmp.Or(q.Attributes["FifoThroughputLimit"], "perQueue")
	}
	if full.DeadLetterQueue != "" {
		n := full.MaxReceiveCount
		if n == 0 {
			n = h.svc.Limits().MaxReceiveCount
		}
		p, _ := json.Marshal(struct {
			Target string `json:"deadLetterTargetArn"`
			Max    int    `json:"maxReceiveCount"`
		}{who.arn(full.DeadLetterQueue), n})
		out["RedrivePolicy"] = string(p)
	}
	return out, nil
}

// retention is MessageRetentionPeriod of an expiration (0: never, shown as
// SQS's longest).
func retention(expirationSeconds int) int {
	if expirationSeconds == 0 {
		return maxRetention
	}
	return expirationSeconds
}

func maxMessageSize(q service.SQSQueue) int {
	if q.MaxMessageBytes > 0 {
		return q.MaxMessageBytes
	}
	return defaultMaxMessageSize
}

// queueAttributeNames are the names GetQueueAttributes knows.
var queueAttributeNames = []string{"All", "QueueArn", "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
	"ApproximateNumberOfMessagesDelayed", "CreatedTimestamp", "LastModifiedTimestamp", "VisibilityTimeout", "DelaySeconds",
	"ReceiveMessageWaitTimeSeconds", "MessageRetentionPeriod", "MaximumMessageSize", "SqsManagedSseEnabled", "RedrivePolicy",
	"RedriveAllowPolicy", "Policy", "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds",
	"FifoQueue", "ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit"}

func (h *Handler) createQueue(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	var in struct {
		QueueName  *string
		Attributes attrs
		Tags       map[string]string `json:"tags"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if in.QueueName == nil || *in.QueueName == "" {
		return nil, missingParameter("QueueName")
	}
	name := *in.QueueName
	given := in.Attributes.strings()
	fifo := strings.EqualFold(given["FifoQueue"], "true")
	switch {
	case fifo && !strings.HasSuffix(name, ".fifo"):
		return nil, invalidParameter("The name of a FIFO queue can only include alphanumeric characters, hyphens, or " +
			"underscores, must end with .fifo suffix and be 1 to 80 in length.")
	case !fifo && strings.HasSuffix(name, ".fifo"):
		return nil, invalidParameter("Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length " +
			"(a name ending in .fifo needs the attribute FifoQueue=true).")
	}
	if msg := service.ValidQueueName(name); msg != "" {
		return nil, invalidParameter("Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length (skipq: the name %s).", msg)
	}
	ch, aerr := h.parseAttributes(ctx, who, name, given, true, fifo)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := checkTags(in.Tags); aerr != nil {
		return nil, aerr
	}
	out := map[string]string{"QueueUrl": who.queueURL(name)}
	existing, err := h.svc.SQSQueue(ctx, who.tenant, name)
	if err == nil {
		current, aerr := h.queueAttributes(ctx, who, existing)
		if aerr != nil {
			return nil, aerr
		}
		current["FifoQueue"] = cmp.Or(current["FifoQueue"], "false")
		for _, k := range slices.Sorted(maps.Keys(given)) {
			if !sameAttribute(k, given[k], current[k]) {
				return nil, newError(errQueueNameExists, "A queue already exists with the same name and a different value for attribute %s", k)
			}
		}
		return out, nil
	}
	if service.KindOf(err) != service.KindNotFound {
		return nil, fromService(err)
	}
	s := ch.settings
	def := func(p **int, v int) {
		if *p == nil {
			*p = &v
		}
	}
	def(&s.VisibilitySeconds, defaultVisibility)
	def(&s.DelaySeconds, 0)
	def(&s.ReceiveWaitSeconds, 0)
	def(&s.ExpirationSeconds, min(defaultRetention, h.svc.Limits().MaxExpirationSeconds))
	q, _, err := h.svc.PutQueueSQS(ctx, who.tenant, name, s)
	if err != nil {
		return nil, fromService(err)
	}
	created, err := h.svc.SQSQueue(ctx, who.tenant, q.Name)
	if err != nil {
		return nil, fromService(err)
	}
	tags := in.Tags
	if tags == nil {
		tags = map[string]string{}
	}
	if err := h.svc.SQSPutQueue(ctx, created.ID, service.SQSExtras{Attributes: ch.verbatim, Tags: tags,
		MaxMessageBytes: ch.extras.MaxMessageBytes}); err != nil {
		return nil, fromService(err)
	}
	h.forget(who.tenant, name)
	return out, nil
}

// sameAttribute compares a CreateQueue attribute with the queue's value:
// numbers as numbers, a RedrivePolicy by its target and count.
func sameAttribute(name, given, current string) bool {
	if given == current || isBool(given) && strings.EqualFold(given, current) {
		return true
	}
	if name == "RedrivePolicy" {
		var a, b map[string]any
		if json.Unmarshal([]byte(given), &a) != nil || json.Unmarshal([]byte(current), &b) != nil {
			return false
		}
		return a["deadLetterTargetArn"] == b["deadLetterTargetArn"] && strings.Trim(jsonText(a["maxReceiveCount"]), `"`) == jsonText(b["maxReceiveCount"])
	}
	x, err1 := strconv.Atoi(strings.TrimSpace(given))
	y, err2 := strconv.Atoi(current)
	return err1 == nil && err2 == nil && x == y
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func checkTags(tags map[string]string) *apiError {
	if len(tags) > maxQueueTags {
		return invalidParameter("Too many tags added for queue: at most %d.", maxQueueTags)
	}
	for k, v := range tags {
		if len(k) < 1 || len(k) > 128 || len(v) > 256 {
			return invalidParameter("Tag keys must be 1 to 128 characters and values at most 256 characters.")
		}
	}
	if service.CheckTexts("Tags", tags) != nil {
		return invalidParameter("Tag keys and values must be valid UTF-8 without NUL characters.")
	}
	return nil
}

func (h *Handler) getQueueURL(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	var in struct {
		QueueName              *string
		QueueOwnerAWSAccountId *string
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if in.QueueName == nil || *in.QueueName == "" {
		return nil, missingParameter("QueueName")
	}
	if in.QueueOwnerAWSAccountId != nil && *in.QueueOwnerAWSAccountId != "" && *in.QueueOwnerAWSAccountId != who.account {
		return nil, queueDoesNotExist()
	}
	if _, err := h.svc.SQSQueue(ctx, who.tenant, *in.QueueName); err != nil {
		return nil, fromService(err)
	}
	return map[string]string{"QueueUrl": who.queueURL(*in.QueueName)}, nil
}

func (h *Handler) listQueues(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	var in struct {
		QueueNamePrefix string
		MaxResults      *int
		NextToken       string
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	limit := 1000
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > 1000 {
			return nil, invalidParameter("Value %d for parameter MaxResults is invalid. Reason: MaxResults must be an integer between 1 and 1000.", *in.MaxResults)
		}
		limit = *in.MaxResults
	}
	qs, next, err := h.svc.ListQueues(ctx, who.tenant, in.QueueNamePrefix, limit, in.NextToken)
	if err != nil {
		if service.KindOf(err) == service.KindInvalid {
			return nil, invalidParameter("Invalid NextToken or QueueNamePrefix.")
		}
		return nil, fromService(err)
	}
	out := map[string]any{}
	var urls []string
	for _, q := range qs {
		urls = append(urls, who.queueURL(q.Name))
	}
	if len(urls) > 0 {
		out["QueueUrls"] = urls
	}
	if next != "" && in.MaxResults != nil {
		out["NextToken"] = next
	}
	return out, nil
}

// queueRequest is the body of the actions that name only a queue.
type queueRequest struct {
	QueueUrl *string
}

// resolve is the queue a request names, read fresh (not cached).
func (h *Handler) resolve(ctx context.Context, who *caller, queueURL *string) (service.SQSQueue, *apiError) {
	name, aerr := queueName(queueURL)
	if aerr != nil {
		return service.SQSQueue{}, aerr
	}
	q, err := h.svc.SQSQueue(ctx, who.tenant, name)
	if err != nil {
		return q, fromService(err)
	}
	return q, nil
}

func (h *Handler) deleteQueue(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	var in queueRequest
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	name, aerr := queueName(in.QueueUrl)
	if aerr != nil {
		return nil, aerr
	}
	if service.ValidQueueName(name) != "" {
		return nil, queueDoesNotExist()
	}
	err := h.svc.DeleteQueue(ctx, who.tenant, name)
	h.forget(who.tenant, name)
	if err != nil {
		return nil, fromService(err)
	}
	return struct{}{}, nil
}

func (h *Handler) purgeQueue(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	var in queueRequest
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	q, aerr := h.resolve(ctx, who, in.QueueUrl)
	if aerr != nil {
		return nil, aerr
	}
	if _, err := h.svc.PurgeQueue(ctx, who.tenant, q.Name); err != nil {
		return nil, fromService(err)
	}
	return struct{}{}, nil
}

func (h *Handler) getQueueAttributes(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	var in struct {
		QueueUrl       *string
		AttributeNames []string
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	q, aerr := h.resolve(ctx, who, in.QueueUrl)
	if aerr != nil {
		return nil, aerr
	}
	for _, n := range in.AttributeNames {
		if !slices.Contains(queueAttributeNames, n) {
			return nil, newError(errInvalidAttributeName, "Unknown Attribute %s.", n)
		}
	}
	if len(in.AttributeNames) == 0 {
		return struct{}{}, nil
	}
	all, aerr := h.queueAttributes(ctx, who, q)
	if aerr != nil {
		return nil, aerr
	}
	out := map[string]string{}
	for k, v := range all {
		if slices.Contains(in.AttributeNames, "All") || slices.Contains(in.AttributeNames, k) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return struct{}{}, nil
	}
	return map[string]any{"Attributes": out}, nil
}

func (h *Handler) setQueueAttributes(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	var in struct {
		QueueUrl   *string
		Attributes attrs
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	q, aerr := h.resolve(ctx, who, in.QueueUrl)
	if aerr != nil {
		return nil, aerr
	}
	if in.Attributes == nil {
		return nil, missingParameter("Attributes")
	}
	ch, aerr := h.parseAttributes(ctx, who, q.Name, in.Attributes.strings(), false, q.FIFO)
	if aerr != nil {
		return nil, aerr
	}
	if _, _, err := h.svc.PutQueueSQS(ctx, who.tenant, q.Name, ch.settings); err != nil {
		return nil, fromService(err)
	}
	merged := maps.Clone(q.Attributes)
	maps.Copy(merged, ch.verbatim)
	if err := h.svc.SQSPutQueue(ctx, q.ID, service.SQSExtras{Attributes: merged, MaxMessageBytes: ch.extras.MaxMessageBytes}); err != nil {
		return nil, fromService(err)
	}
	h.forget(who.tenant, q.Name)
	return struct{}{}, nil
}

func (h *Handler) listDeadLetterSourceQueues(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	var in struct {
		QueueUrl   *string
		MaxResults *int
		NextToken  string
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	q, aerr := h.resolve(ctx, who, in.QueueUrl)
	if aerr != nil {
		return nil, aerr
	}
	limit := 1000
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > 1000 {
			return nil, invalidParameter("Value %d for parameter MaxResults is invalid. Reason: MaxResults must be an integer between 1 and 1000.", *in.MaxResults)
		}
		limit = *in.MaxResults
	}
	after, err := base64.RawURLEncoding.DecodeString(in.NextToken)
	if err != nil {
		return nil, invalidParameter("Invalid NextToken.")
	}
	names, more, serr := h.svc.SQSDeadLetterSources(ctx, who.tenant, q.Name, string(after), limit)
	if service.KindOf(serr) == service.KindInvalid { // a token that decodes to no queue name
		return nil, invalidParameter("Invalid NextToken.")
	}
	if serr != nil {
		return nil, fromService(serr)
	}
	urls := []string{}
	for _, n := range names {
		urls = append(urls, who.queueURL(n))
	}
	out := map[string]any{"queueUrls": urls}
	if more && in.MaxResults != nil {
		out["NextToken"] = base64.RawURLEncoding.EncodeToString([]byte(names[len(names)-1]))
	}
	return out, nil
}

func (h *Handler) tagQueue(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	var in struct {
		QueueUrl *string
		Tags     map[string]string
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	q, aerr := h.resolve(ctx, who, in.QueueUrl)
	if aerr != nil {
		return nil, aerr
	}
	if len(in.Tags) == 0 {
		return nil, missingParameter("Tags")
	}
	tags := maps.Clone(q.Tags)
	maps.Copy(tags, in.Tags)
	if aerr := checkTags(tags); aerr != nil {
		return nil, aerr
	}
	if err := h.svc.SQSPutQueue(ctx, q.ID, service.SQSExtras{Tags: tags}); err != nil {
		return nil, fromService(err)
	}
	return struct{}{}, nil
}

func (h *Handler) untagQueue(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	var in struct {
		QueueUrl *string
		TagKeys  []string
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	q, aerr := h.resolve(ctx, who, in.QueueUrl)
	if aerr != nil {
		return nil, aerr
	}
	if len(in.TagKeys) == 0 {
		return nil, missingParameter("TagKeys")
	}
	tags := maps.Clone(q.Tags)
	for _, k := range in.TagKeys {
		delete(tags, k)
	}
	if err := h.svc.SQSPutQueue(ctx, q.ID, service.SQSExtras{Tags: tags}); err != nil {
		return nil, fromService(err)
	}
	return struct{}{}, nil
}

func (h *Handler) listQueueTags(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	var in queueRequest
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	q, aerr := h.resolve(ctx, who, in.QueueUrl)
	if aerr != nil {
		return nil, aerr
	}
	if len(q.Tags) == 0 {
		return struct{}{}, nil
	}
	return map[string]any{"Tags": q.Tags}, nil
}
