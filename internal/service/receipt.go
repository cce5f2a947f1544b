package service

import (
	"encoding/base64"
	"encoding/binary"
	"unsafe"
)

// A receipt handle names one delivery: the message's primary key and the
// lease token its claim minted (244 random bits), base64url-encoded. Only the
// token makes it a capability; the key lets settling find the row by
// primary key.
type receipt struct {
	queueID  int64
	sequence int64
	token    []byte
}

const (
	tokenBytes   = 32
	receiptBytes = 8 + 8 + tokenBytes
)

func encodeReceipt(queueID, sequence int64, token []byte) string {
	var raw [receiptBytes]byte
	binary.BigEndian.PutUint64(raw[:8], uint64(queueID))
	binary.BigEndian.PutUint64(raw[8:16], uint64(sequence))
	copy(raw[16:], token)
	// One allocation, the handle's own: the encoded bytes become the
	// string, as nothing else holds them.
	handle := make([]byte, base64.RawURLEncoding.EncodedLen(receiptBytes))
	base64.RawURLEncoding.Encode(handle, raw[:])
	return unsafe.String(unsafe.SliceData(handle), len(handle))
}

// parseReceipt decodes a handle; ok is false for anything this server could
// not have issued (which then settles nothing: receipt_stale).
func parseReceipt(handle string) (r receipt, ok bool) {
	return parseReceiptInto(handle, make([]byte, tokenBytes))
}

// parseReceiptInto is parseReceipt with the token copied into token
// (tokenBytes long), so that a request's handles share one allocation.
func parseReceiptInto(handle string, token []byte) (r receipt, ok bool) {
	// Exactly the encoded length: the decoder skips \r and \n, so a longer
	// string could still decode to the same bytes.
	if len(handle) != base64.RawURLEncoding.EncodedLen(receiptBytes) {
		return receipt{}, false
	}
	var raw [receiptBytes]byte
	// The decoder only reads the handle's bytes.
	n, err := base64.RawURLEncoding.Decode(raw[:], unsafe.Slice(unsafe.StringData(handle), len(handle)))
	if err != nil || n != receiptBytes {
		return receipt{}, false
	}
	copy(token, raw[16:])
	return receipt{
		queueID:  int64(binary.BigEndian.Uint64(raw[0:8])),
		sequence: int64(binary.BigEndian.Uint64(raw[8:16])),
		token:    token,
	}, true
}

// receipts is a parsed settle request: the well-formed handles as parallel
// arrays for the ANY(...) statements, and which input each came from. A
// handle given more than once is sent once: its first copy can settle the
// message, the others fail as stale (a message is settled once, and counted
// once).
type receipts struct {
	handles   []string
	parsed    []receipt
	valid     []bool
	queueIDs  []int64
	sequences []int64
	tokens    [][]byte
}

func parseReceipts(handles []string) receipts {
	n := len(handles)
	rs := receipts{handles: handles, parsed: make([]receipt, n), valid: make([]bool, n),
		queueIDs: make([]int64, 0, n), sequences: make([]int64, 0, n), tokens: make([][]byte, 0, n)}
	tokens := make([]byte, n*tokenBytes)
	seen := make(map[string]bool, n)
	for i, h := range handles {
		r, ok := parseReceiptInto(h, tokens[i*tokenBytes:(i+1)*tokenBytes:(i+1)*tokenBytes])
		if !ok || seen[h] {
			continue
		}
		seen[h] = true
		rs.parsed[i], rs.valid[i] = r, true
		rs.queueIDs = append(rs.queueIDs, r.queueID)
		rs.sequences = append(rs.sequences, r.sequence)
		rs.tokens = append(rs.tokens, r.token)
	}
	return rs
}

// settledKey names one delivery that a statement settled: the row and the
// lease token that matched it. Keying by the token too means a stale handle
// of the same message, sent next to its live one, is not credited.
type settledKey struct {
	queueID, sequence int64
	token             [tokenBytes]byte // an array, not a string: a key costs no allocation
}

func settled(queueID, sequence int64, token []byte) settledKey {
	k := settledKey{queueID: queueID, sequence: sequence}
	copy(k.token[:], token)
	return k
}

func (r receipt) key() settledKey { return settled(r.queueID, r.sequence, r.token) }

// result reports, per input handle, whether it settled its message.
func (rs receipts) result(changed map[settledKey]bool) SettleResult {
	return rs.resultFor(changed, func(string) bool { return true })
}

// resultFor is result for a request whose statement was shared: a handle
// counts only if this request owns it (a handle two requests named is
// credited to one of them).
func (rs receipts) resultFor(changed map[settledKey]bool, owns func(handle string) bool) SettleResult {
	var res SettleResult
	for i, h := range rs.handles {
		if rs.valid[i] && changed[rs.parsed[i].key()] && owns(h) {
			res.Succeeded++
			continue
		}
		res.Failed = append(res.Failed, SettleFailure{ReceiptHandle: h, Err: ErrReceiptStale})
	}
	return res
}

// SettleResult is the outcome of a settle request.
type SettleResult struct {
	Succeeded int
	Failed    []SettleFailure
}

// SettleFailure is one handle that settled nothing.
type SettleFailure struct {
	ReceiptHandle string
	Err           *Error
}
