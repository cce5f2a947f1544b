package sqs

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/skipq/skipq/internal/service"
)

// Limits of docs/SQS.md#limits.
const (
	maxBatchEntries   = 10
	maxBatchBytes     = 1048576
	maxAttributes     = 10
	maxDelaySeconds   = 900
	maxVisibility     = 43200
	maxWaitSeconds    = 20
	maxReceiveBatch   = 10
	maxAttributeName  = 256
	nativeTagMaxValue = 1024
	// maxTraceHeaderBytes bounds AWSTraceHeader. As in SQS it does not
	// count towards the message's size, so it needs a bound of its own: an
	// X-Ray trace header (Root, Parent, Sampled, Lineage) is under 256
	// bytes, and this leaves room for vendors' extra fields.
	maxTraceHeaderBytes = 1024
)

var (
	batchIDPattern       = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)
	attributeNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
	dataTypePattern      = regexp.MustCompile(`^(String|Number|Binary)(\..+)?$`)
	// sqsIDPattern is a MessageGroupId or MessageDeduplicationId:
	// alphanumeric and punctuation characters, 1 to 128.
	sqsIDPattern = regexp.MustCompile(`^[!-~]{1,128}$`)
)

// sendEntry is one message of SendMessage or SendMessageBatch.
type sendEntry struct {
	Id                      string
	MessageBody             *string
	DelaySeconds            *int
	MessageAttributes       map[string]Attribute
	MessageSystemAttributes map[string]Attribute
	MessageDeduplicationId  *string
	MessageGroupId          *string
}

// sendOutput is SendMessage's answer (and a batch's Successful entry).
type sendOutput struct {
	Id                           string `json:",omitempty"`
	MessageId                    string
	MD5OfMessageBody             string
	MD5OfMessageAttributes       string `json:",omitempty"`
	MD5OfMessageSystemAttributes string `json:",omitempty"`
	SequenceNumber               string `json:",omitempty"`
}

// sent completes an answer with what the send stored: the message's id and,
// on a FIFO queue, its sequence number (a duplicate's are its first send's).
func (o *sendOutput) sent(q service.SQSQueue, r service.SendResult) {
	o.MessageId = r.MessageID
	if q.FIFO {
		o.SequenceNumber = strconv.FormatInt(r.Sequence, 10)
	}
}

// validBodyChars is SQS's allowed set: #x9 #xA #xD #x20–#xD7FF
// #xE000–#xFFFD #x10000–#x10FFFF.
func badBodyChar(s string) (rune, bool) {
	for _, r := range s {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000 && r <= 0x10FFFF:
		default:
			return r, true
		}
	}
	return 0, false
}

// prepareEntry validates one message and maps it onto a native send.
func (h *Handler) prepareEntry(who *caller, q service.SQSQueue, e sendEntry) (service.MessageInput, sendOutput, *apiError) {
	var out sendOutput
	if e.MessageBody == nil || *e.MessageBody == "" {
		return service.MessageInput{}, out, missingParameter("MessageBody")
	}
	body := *e.MessageBody
	if r, bad := badBodyChar(body); bad {
		return service.MessageInput{}, out, newError(errInvalidMessageContents,
			"Invalid binary character '#x%X' was found in the message body, the set of allowed characters is "+
				"#x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF", r)
	}
	if e.DelaySeconds != nil && (*e.DelaySeconds < 0 || *e.DelaySeconds > maxDelaySeconds) {
		return service.MessageInput{}, out, invalidParameter("Value %d for parameter DelaySeconds is invalid. "+
			"Reason: DelaySeconds must be >= 0 and <= 900.", *e.DelaySeconds)
	}
	doc := &service.SQSData{}
	in := service.MessageInput{Body: body, ClientID: who.clientID, DelaySeconds: e.DelaySeconds}
	if aerr := groupAndDedup(q, e, doc, &in); aerr != nil {
		return service.MessageInput{}, out, aerr
	}
	size := len(body)
	if len(e.MessageAttributes) > maxAttributes {
		return service.MessageInput{}, out, invalidParameter("Number of message attributes [%d] exceeds the allowed maximum [%d].",
			len(e.MessageAttributes), maxAttributes)
	}
	for name, a := range e.MessageAttributes {
		if aerr := checkAttribute(name, a); aerr != nil {
			return service.MessageInput{}, out, aerr
		}
		size += len(name) + len(a.DataType) + len(a.BinaryValue)
		if a.StringValue != nil {
			size += len(*a.StringValue)
		}
	}
	for name, a := range e.MessageSystemAttributes {
		if name != "AWSTraceHeader" {
			return service.MessageInput{}, out, invalidParameter("Message system attribute name '%s' is invalid.", name)
		}
		if a.DataType != "String" || a.StringValue == nil || *a.StringValue == "" {
			return service.MessageInput{}, out, invalidParameter("Message system attribute AWSTraceHeader must have DataType String and a StringValue.")
		}
		if len(*a.StringValue) > maxTraceHeaderBytes {
			return service.MessageInput{}, out, invalidParameter("Message system attribute AWSTraceHeader is longer than %d bytes.", maxTraceHeaderBytes)
		}
		doc.TraceHeader = *a.StringValue
	}
	if doc.TraceHeader == "" {
		if len(who.trace) > maxTraceHeaderBytes {
			return service.MessageInput{}, out, invalidParameter("The X-Amzn-Trace-Id header, stored as AWSTraceHeader, is longer than %d bytes.", maxTraceHeaderBytes)
		}
		doc.TraceHeader = who.trace
	}
	if limit := maxMessageSize(q); size > limit {
		return service.MessageInput{}, out, invalidParameter("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", limit)
	}
	if len(e.MessageAttributes) > 0 {
		doc.Attributes = map[string]service.SQSAttribute{}
		for name, a := range e.MessageAttributes {
			doc.Attributes[name] = service.SQSAttribute{DataType: a.DataType, StringValue: a.StringValue, BinaryValue: a.BinaryValue}
		}
		in.Tags = map[string]string{}
		for name, a := range e.MessageAttributes {
			if a.DataType == "String" && service.IsTagKey(name) && !strings.HasPrefix(name, service.ReservedTagPrefix) &&
				len(*a.StringValue) <= nativeTagMaxValue && !strings.ContainsRune(*a.StringValue, 0) {
				in.Tags[name] = *a.StringValue
			}
		}
	}
	if doc.Attributes != nil || doc.TraceHeader != "" || doc.GroupID != "" || doc.DedupID != "" {
		in.SQS = doc
	}
	out.MD5OfMessageBody = bodyMD5(body)
	out.MD5OfMessageAttributes = attributesMD5(e.MessageAttributes)
	out.MD5OfMessageSystemAttributes = attributesMD5(e.MessageSystemAttributes)
	return in, out, nil
}

// groupAndDedup applies MessageGroupId and MessageDeduplicationId
// (docs/SQS.md#fifo-queues; docs/DESIGN.md#the-sqs-endpoint, D6). On a standard queue a group has no effect (it is kept
// for the receiver) and a deduplication id is refused. On a FIFO queue the
// group is the native group, every message needs one, a message needs a
// deduplication id unless the queue deduplicates by content, and a
// per-message delay is refused.
func groupAndDedup(q service.SQSQueue, e sendEntry, doc *service.SQSData, in *service.MessageInput) *apiError {
	if g := e.MessageGroupId; g != nil && !sqsIDPattern.MatchString(*g) {
		return invalidParameter("Value %s for parameter MessageGroupId is invalid. Reason: MessageGroupId can only include "+
			"alphanumeric and punctuation characters. 1 to 128 in length.", *g)
	}
	if d := e.MessageDeduplicationId; d != nil && q.FIFO && !sqsIDPattern.MatchString(*d) {
		return invalidParameter("Value %s for parameter MessageDeduplicationId is invalid. Reason: MessageDeduplicationId "+
			"can only include alphanumeric and punctuation characters. 1 to 128 in length.", *d)
	}
	if !q.FIFO {
		if e.MessageDeduplicationId != nil {
			return invalidParameter("Value %s for parameter MessageDeduplicationId is invalid. "+
				"Reason: The request includes a parameter that is not valid for this queue type.", *e.MessageDeduplicationId)
		}
		if e.MessageGroupId != nil {
			doc.GroupID = *e.MessageGroupId
		}
		return nil
	}
	if e.MessageGroupId == nil {
		return missingParameter("MessageGroupId")
	}
	if e.DelaySeconds != nil && *e.DelaySeconds != 0 {
		return invalidParameter("Value %d for parameter DelaySeconds is invalid. "+
			"Reason: The request include parameter that is not valid for this queue type.", *e.DelaySeconds)
	}
	group := *e.MessageGroupId
	in.GroupID = nativeGroup(group)
	if in.GroupID != group {
		doc.GroupID = group
	}
	byGroup := q.Attributes["DeduplicationScope"] == "messageGroup"
	switch {
	case e.MessageDeduplicationId != nil:
		doc.DedupID = *e.MessageDeduplicationId
		in.SQSDedupID = doc.DedupID
	case q.ContentBasedDeduplication:
		sum := sha256.Sum256([]byte(*e.MessageBody))
		doc.DedupID = hex.EncodeToString(sum[:])
		// Queue-wide, the native content key deduplicates it (against
		// native sends too); per group, the group is part of the key.
		if byGroup {
			in.SQSDedupID = doc.DedupID
		}
	default:
		return invalidParameter("The queue should either have ContentBasedDeduplication enabled or " +
			"MessageDeduplicationId provided explicitly")
	}
	if byGroup && in.SQSDedupID != "" {
		in.SQSDedupID = strconv.Itoa(len(group)) + "/" + group + "/" + in.SQSDedupID
	}
	return nil
}

// nativeGroup is the native group of a MessageGroupId: itself when native
// groups allow it (service.IsID), else a name derived from its hash (SQS allows any
// punctuation; the message keeps the id as given for its receivers).
func nativeGroup(id string) string {
	if service.IsID(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "sqs." + hex.EncodeToString(sum[:20])
}

// checkAttribute checks one message attribute (docs/SQS.md#actions).
func checkAttribute(name string, a Attribute) *apiError {
	lower := strings.ToLower(name)
	switch {
	case name == "" || len(name) > maxAttributeName || !attributeNamePattern.MatchString(name) ||
		strings.HasPrefix(lower, "aws.") || strings.HasPrefix(lower, "amazon.") ||
		strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, ".."):
		return invalidParameter("Message (user) attribute name '%s' is invalid.", name)
	case a.DataType == "":
		return invalidParameter("The message attribute '%s' must contain non-empty message attribute type.", name)
	case len(a.DataType) > maxAttributeName || !dataTypePattern.MatchString(a.DataType):
		return invalidParameter("The message attribute '%s' has an invalid message attribute type, the set of supported "+
			"type prefixes is Binary, Number, and String.", name)
	case len(a.StringListValues) > 0 || len(a.BinaryListValues) > 0:
		return invalidParameter("Message attribute list values in SendMessage operation are not supported.")
	}
	if isBinary(a.DataType) {
		if len(a.BinaryValue) == 0 {
			return invalidParameter("The message attribute '%s' with type 'Binary' must use field 'Binary'.", name)
		}
		return nil
	}
	if a.StringValue == nil || *a.StringValue == "" {
		return invalidParameter("The message attribute '%s' with type '%s' must use field 'String'.", name, baseType(a.DataType))
	}
	if _, bad := badBodyChar(*a.StringValue); bad {
		return invalidParameter("The message attribute '%s' contains invalid characters.", name)
	}
	if baseType(a.DataType) == "Number" && !validNumber(*a.StringValue) {
		return invalidParameter("Can't cast the value of message (user) attribute '%s' to a number.", name)
	}
	return nil
}

// numberPattern is a Number attribute's form: a decimal with an optional
// sign and exponent (no NaN, Infinity, hexadecimal or digit separators).
var numberPattern = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]{1,4})?$`)

// Number attributes hold what SQS's numbers hold: up to 38 significant
// digits, with a magnitude from 10^-128 to 10^126.
const (
	maxNumberDigits   = 38
	minNumberExponent = -128
	maxNumberExponent = 126
)

// validNumber reports whether v is a number a Number attribute may carry.
func validNumber(v string) bool {
	m := numberPattern.FindStringSubmatch(v)
	if m == nil {
		return false
	}
	mantissa, exp := m[1], 0
	if m[2] != "" {
		exp, _ = strconv.Atoi(strings.TrimLeft(m[2][1:], "+")) // at most 4 digits: it fits
	}
	whole, fraction, _ := strings.Cut(mantissa, ".")
	digits := whole + fraction
	significant := strings.TrimLeft(digits, "0")
	if significant == "" {
		return true // zero
	}
	leadingZeros := len(digits) - len(significant)
	if len(strings.TrimRight(significant, "0")) > maxNumberDigits {
		return false
	}
	// The power of ten of the first significant digit.
	magnitude := len(whole) - 1 - leadingZeros + exp
	return magnitude >= minNumberExponent && magnitude <= maxNumberExponent
}

// sendQueue is the queue a send or receive names: existence is checked
// (SQS never auto-creates), from the cache.
func (h *Handler) sendQueue(ctx context.Context, who *caller, queueURL *string) (service.SQSQueue, *apiError) {
	name, aerr := queueName(queueURL)
	if aerr != nil {
		return service.SQSQueue{}, aerr
	}
	return h.cachedQueue(ctx, who.tenant, name)
}

func (h *Handler) sendMessage(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	var in struct {
		QueueUrl *string
		sendEntry
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	q, aerr := h.sendQueue(ctx, who, in.QueueUrl)
	if aerr != nil {
		return nil, aerr
	}
	msg, out, aerr := h.prepareEntry(who, q, in.sendEntry)
	if aerr != nil {
		return nil, aerr
	}
	res, err := h.svc.SQSSend(ctx, who.tenant, q.Name, msg)
	if err != nil {
		return nil, fromService(err)
	}
	out.sent(q, res)
	return out, nil
}

// batchFailure is a Failed entry of a batch answer.
type batchFailure struct {
	Id          string
	SenderFault bool
	Code        string
	Message     string
}

func failure(id string, e *apiError) batchFailure {
	_, code, _, fault := e.wire()
	return batchFailure{Id: id, SenderFault: fault == "Sender", Code: code, Message: e.message}
}

// checkBatch applies the request-level batch rules to the entries' ids.
func checkBatch(ids []string) *apiError {
	switch {
	case len(ids) == 0:
		return newError(errEmptyBatch, "There should be at least one SendMessageBatchRequestEntry in the request.")
	case len(ids) > maxBatchEntries:
		return newError(errTooManyEntries, "Maximum number of entries per request are 10. You have sent %d.", len(ids))
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if !batchIDPattern.MatchString(id) {
			return newError(errInvalidBatchEntryID, "A batch entry id can only contain alphanumeric characters, "+
				"hyphens and underscores. It can be at most 80 letters long.")
		}
		if seen[id] {
			return newError(errIDsNotDistinct, "Id %s repeated.", id)
		}
		seen[id] = true
	}
	return nil
}

func (h *Handler) sendMessageBatch(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	var in struct {
		QueueUrl *string
		Entries  []sendEntry
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	q, aerr := h.sendQueue(ctx, who, in.QueueUrl)
	if aerr != nil {
		return nil, aerr
	}
	ids := make([]string, len(in.Entries))
	total := 0
	for i, e := range in.Entries {
		ids[i] = e.Id
		if e.MessageBody != nil {
			total += len(*e.MessageBody)
		}
		for n, a := range e.MessageAttributes {
			total += len(n) + len(a.DataType) + len(a.BinaryValue)
			if a.StringValue != nil {
				total += len(*a.StringValue)
			}
		}
	}
	if aerr := checkBatch(ids); aerr != nil {
		return nil, aerr
	}
	if total > maxBatchBytes {
		return nil, newError(errBatchTooLong, "Batch requests cannot be longer than 1048576 bytes. You have sent %d bytes.", total)
	}
	successful, failed := []sendOutput{}, []batchFailure{}
	var msgs []service.MessageInput
	var outs []sendOutput
	for _, e := range in.Entries {
		msg, out, aerr := h.prepareEntry(who, q, e)
		if aerr != nil {
			failed = append(failed, failure(e.Id, aerr))
			continue
		}
		out.Id = e.Id
		msgs, outs = append(msgs, msg), append(outs, out)
	}
	if len(msgs) > 0 {
		res, err := h.svc.SQSSendBatch(ctx, who.tenant, q.Name, msgs)
		if err != nil {
			return nil, fromService(err)
		}
		for i := range outs {
			outs[i].sent(q, res[i])
		}
		successful = outs
	}
	return map[string]any{"Successful": successful, "Failed": failed}, nil
}

// wireMessage is a received message.
type wireMessage struct {
	MessageId              string
	ReceiptHandle          string
	MD5OfBody              string
	Body                   string
	Attributes             map[string]string    `json:",omitempty"`
	MessageAttributes      map[string]Attribute `json:",omitempty"`
	MD5OfMessageAttributes string               `json:",omitempty"`
}

func (h *Handler) receiveMessage(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	var in struct {
		QueueUrl                    *string
		MaxNumberOfMessages         *int
		VisibilityTimeout           *int
		WaitTimeSeconds             *int
		AttributeNames              []string
		MessageSystemAttributeNames []string
		MessageAttributeNames       []string
		ReceiveRequestAttemptId     *string
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	q, aerr := h.sendQueue(ctx, who, in.QueueUrl)
	if aerr != nil {
		return nil, aerr
	}
	max := 1
	if v := in.MaxNumberOfMessages; v != nil {
		if *v < 1 || *v > maxReceiveBatch {
			return nil, invalidParameter("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", *v)
		}
		max = *v
	}
	wait := min(q.ReceiveWaitSeconds, maxWaitSeconds)
	if v := in.WaitTimeSeconds; v != nil {
		if *v < 0 || *v > maxWaitSeconds {
			return nil, invalidParameter("Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", *v)
		}
		wait = *v
	}
	if v := in.VisibilityTimeout; v != nil && (*v < 0 || *v > maxVisibility) {
		return nil, invalidParameter("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200, if provided.", *v)
	}
	attempt := ""
	if v := in.ReceiveRequestAttemptId; v != nil && q.FIFO {
		// Ignored on standard queues: clients (Spring Cloud AWS) send it.
		if !sqsIDPattern.MatchString(*v) {
			return nil, invalidParameter("Value %s for parameter ReceiveRequestAttemptId is invalid. Reason: It can only include "+
				"alphanumeric and punctuation characters. 1 to 128 in length.", *v)
		}
		attempt = *v
	}
	msgs, aerr := h.receive(ctx, who, q, attempt, service.ReceiveOptions{MaxMessages: &max,
		VisibilitySeconds: in.VisibilityTimeout, WaitSeconds: &wait})
	if aerr != nil {
		return nil, aerr
	}
	if len(msgs) == 0 {
		return struct{}{}, nil
	}
	sysNames := append(slices.Clone(in.AttributeNames), in.MessageSystemAttributeNames...)
	out := make([]wireMessage, len(msgs))
	for i, m := range msgs {
		out[i] = renderMessage(who, m, sysNames, in.MessageAttributeNames)
	}
	return map[string]any{"Messages": out}, nil
}

// receive claims messages; on a FIFO queue it takes as many of a group as
// it may, as SQS does, and a retried attempt gets its first answer again.
func (h *Handler) receive(ctx context.Context, who *caller, q service.SQSQueue, attempt string, o service.ReceiveOptions) ([]service.Message, *apiError) {
	if !q.FIFO {
		msgs, err := h.svc.ReceiveSQS(ctx, who.tenant, q.Name, o)
		return msgs, fromServiceOrNil(err)
	}
	o.MaxMessagesPerGroup = o.MaxMessages
	if attempt != "" {
		msgs, ok, err := h.state.ReceiveAgain(ctx, q.ID, q.Name, attempt)
		if err != nil {
			return nil, fromService(err)
		}
		if ok {
			return msgs, nil
		}
	}
	msgs, err := h.svc.ReceiveSQS(ctx, who.tenant, q.Name, o)
	if err != nil || attempt == "" || len(msgs) == 0 {
		return msgs, fromServiceOrNil(err)
	}
	h.state.RecordReceive(ctx, q.ID, attempt, msgs)
	return msgs, nil
}

// renderMessage is a received message with the requested attributes.
func renderMessage(who *caller, m service.Message, sysNames, attrNames []string) wireMessage {
	body := string(m.Body)
	if m.BodyBinary {
		body = base64.StdEncoding.EncodeToString(m.Body)
	}
	w := wireMessage{MessageId: m.MessageID, ReceiptHandle: m.ReceiptHandle, MD5OfBody: bodyMD5(body), Body: body}
	doc := service.SQSData{}
	if m.SQS != nil {
		doc = *m.SQS
	}
	all := map[string]Attribute{}
	for k, v := range m.Tags {
		all[k] = Attribute{DataType: "String", StringValue: &v}
	}
	for k, v := range doc.Attributes {
		all[k] = Attribute{DataType: v.DataType, StringValue: v.StringValue, BinaryValue: v.BinaryValue}
	}
	picked := map[string]Attribute{}
	for k, v := range all {
		if attributeSelected(k, attrNames) {
			picked[k] = v
		}
	}
	if len(picked) > 0 {
		w.MessageAttributes, w.MD5OfMessageAttributes = picked, attributesMD5(picked)
	}
	system := map[string]string{
		"SentTimestamp":           strconv.FormatInt(m.SentAt.UnixMilli(), 10),
		"ApproximateReceiveCount": strconv.Itoa(m.ReceiveCount),
	}
	if m.ClientID != "" {
		system["SenderId"] = m.ClientID
	}
	if m.FirstReceivedAt != nil {
		system["ApproximateFirstReceiveTimestamp"] = strconv.FormatInt(m.FirstReceivedAt.UnixMilli(), 10)
	}
	if doc.TraceHeader != "" {
		system["AWSTraceHeader"] = doc.TraceHeader
	}
	switch {
	case doc.GroupID != "":
		system["MessageGroupId"] = doc.GroupID
	case m.GroupID != nil:
		system["MessageGroupId"] = *m.GroupID
	}
	if m.GroupID != nil {
		// A message sent natively is deduplicated by its messageId.
		system["MessageDeduplicationId"] = cmp.Or(doc.DedupID, m.MessageID)
		system["SequenceNumber"] = strconv.FormatInt(m.Sequence, 10)
	}
	if m.DeadLetteredAt != nil && m.ReRoutedFrom != nil {
		system["DeadLetterQueueSourceArn"] = who.arn(*m.ReRoutedFrom)
	}
	for k, v := range system {
		if slices.Contains(sysNames, "All") || slices.Contains(sysNames, k) {
			if w.Attributes == nil {
				w.Attributes = map[string]string{}
			}
			w.Attributes[k] = v
		}
	}
	return w
}

// attributeSelected applies MessageAttributeNames: All, * or .* select
// everything, "prefix.*" names starting with prefix, others exact names.
func attributeSelected(name string, selectors []string) bool {
	for _, s := range selectors {
		switch {
		case s == "All" || s == "*" || s == ".*":
			return true
		case strings.HasSuffix(s, ".*"):
			if strings.HasPrefix(name, strings.TrimSuffix(s, ".*")) {
				return true
			}
		case s == name:
			return true
		}
	}
	return false
}

// settleQueue checks that a handle is well-formed and of the queue.
func settleQueue(q service.SQSQueue, handle *string) *apiError {
	if handle == nil || *handle == "" {
		return missingParameter("ReceiptHandle")
	}
	id, ok := service.ReceiptQueueID(*handle)
	if !ok || id != q.ID {
		return invalidReceiptHandle(*handle)
	}
	return nil
}

func (h *Handler) deleteMessage(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	var in struct {
		QueueUrl      *string
		ReceiptHandle *string
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	q, aerr := h.sendQueue(ctx, who, in.QueueUrl)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := settleQueue(q, in.ReceiptHandle); aerr != nil {
		return nil, aerr
	}
	// A stale handle deletes nothing and succeeds, as in SQS.
	if _, err := h.svc.Ack(ctx, []string{*in.ReceiptHandle}); err != nil {
		return nil, fromService(err)
	}
	return struct{}{}, nil
}

// settleEntry is one entry of DeleteMessageBatch or
// ChangeMessageVisibilityBatch.
type settleEntry struct {
	Id                string
	ReceiptHandle     *string
	VisibilityTimeout *int
}

type batchSuccess struct{ Id string }

// settleBatch answers DeleteMessageBatch and ChangeMessageVisibilityBatch:
// each entry is checked alone (a malformed or other-queue handle fails
// only its entry), and settle acts on the valid ones together, returning
// a failure per entry index that settled nothing.
func (h *Handler) settleBatch(ctx context.Context, who *caller, body []byte,
	settle func(entries []settleEntry) (map[int]*apiError, *apiError)) (any, *apiError) {
	var in struct {
		QueueUrl *string
		Entries  []settleEntry
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	q, aerr := h.sendQueue(ctx, who, in.QueueUrl)
	if aerr != nil {
		return nil, aerr
	}
	ids := make([]string, len(in.Entries))
	for i, e := range in.Entries {
		ids[i] = e.Id
	}
	if aerr := checkBatch(ids); aerr != nil {
		return nil, aerr
	}
	failedAt := map[int]*apiError{}
	var valid []settleEntry
	var at []int
	for i, e := range in.Entries {
		if aerr := settleQueue(q, e.ReceiptHandle); aerr != nil {
			failedAt[i] = aerr
			continue
		}
		valid, at = append(valid, e), append(at, i)
	}
	if len(valid) > 0 {
		res, aerr := settle(valid)
		if aerr != nil {
			return nil, aerr
		}
		for j, e := range res {
			failedAt[at[j]] = e
		}
	}
	successful, failed := []batchSuccess{}, []batchFailure{}
	for i, e := range in.Entries {
		if f, ok := failedAt[i]; ok {
			failed = append(failed, failure(e.Id, f))
			continue
		}
		successful = append(successful, batchSuccess{e.Id})
	}
	return map[string]any{"Successful": successful, "Failed": failed}, nil
}

// deleteMessageBatch acks every valid handle in one call; stale ones
// succeed, as in SQS.
func (h *Handler) deleteMessageBatch(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	return h.settleBatch(ctx, who, body, func(entries []settleEntry) (map[int]*apiError, *apiError) {
		handles := make([]string, len(entries))
		for i, e := range entries {
			handles[i] = *e.ReceiptHandle
		}
		if _, err := h.svc.Ack(ctx, handles); err != nil {
			return nil, fromService(err)
		}
		return nil, nil
	})
}

func checkVisibility(seconds *int) *apiError {
	if seconds == nil {
		return missingParameter("VisibilityTimeout")
	}
	if *seconds < 0 || *seconds > maxVisibility {
		return invalidParameter("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200.", *seconds)
	}
	return nil
}

// changeVisibility sets the leases of handles to seconds (docs/SQS.md#actions)
// and returns the indexes of the handles that changed nothing (stale:
// InvalidParameterValue); 0 makes a message available now.
func (h *Handler) changeVisibility(ctx context.Context, handles []string, seconds *int) (map[int]*apiError, *apiError) {
	if aerr := checkVisibility(seconds); aerr != nil {
		return nil, aerr
	}
	res, err := h.svc.SetVisibility(ctx, handles, *seconds)
	if err != nil {
		return nil, fromService(err)
	}
	stale := map[string]bool{}
	for _, f := range res.Failed {
		stale[f.ReceiptHandle] = true
	}
	failed := map[int]*apiError{}
	for i, hd := range handles {
		if stale[hd] {
			failed[i] = invalidParameter("Value %s for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not "+
				"available for visibility timeout change.", hd)
		}
	}
	return failed, nil
}

func (h *Handler) changeMessageVisibility(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	var in struct {
		QueueUrl          *string
		ReceiptHandle     *string
		VisibilityTimeout *int
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	q, aerr := h.sendQueue(ctx, who, in.QueueUrl)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := settleQueue(q, in.ReceiptHandle); aerr != nil {
		return nil, aerr
	}
	failed, aerr := h.changeVisibility(ctx, []string{*in.ReceiptHandle}, in.VisibilityTimeout)
	if aerr != nil {
		return nil, aerr
	}
	if f, ok := failed[0]; ok {
		return nil, f
	}
	return struct{}{}, nil
}

// changeMessageVisibilityBatch sets the leases of the entries that share a
// timeout in one call each; an entry's own bad timeout fails only it.
func (h *Handler) changeMessageVisibilityBatch(ctx context.Context, who *caller, body []byte) (any, *apiError) {
	return h.settleBatch(ctx, who, body, func(entries []settleEntry) (map[int]*apiError, *apiError) {
		failed := map[int]*apiError{}
		groups := map[int][]int{}
		var order []int
		for i, e := range entries {
			if aerr := checkVisibility(e.VisibilityTimeout); aerr != nil {
				failed[i] = aerr
				continue
			}
			v := *e.VisibilityTimeout
			if groups[v] == nil {
				order = append(order, v)
			}
			groups[v] = append(groups[v], i)
		}
		for _, v := range order {
			handles := make([]string, len(groups[v]))
			for j, i := range groups[v] {
				handles[j] = *entries[i].ReceiptHandle
			}
			res, aerr := h.changeVisibility(ctx, handles, &v)
			if aerr != nil {
				return nil, aerr
			}
			for j, e := range res {
				failed[groups[v][j]] = e
			}
		}
		return failed, nil
	})
}
