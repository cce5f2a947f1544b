package service

import (
	"encoding/base64"
	"encoding/binary"
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
	b := make([]byte, 0, receiptBytes)
	b = binary.BigEndian.AppendUint64(b, uint64(queueID))
	b = binary.BigEndian.AppendUint64(b, uint64(sequence))
	b = append(b, token...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// parseReceipt decodes a handle; ok is false for anything this server could
// not have issued (which then settles nothing: receipt_stale).
func parseReceipt(handle string) (r receipt, ok bool) {
	// Exactly the encoded length: the decoder skips \r and \n, so a longer
	// string could still decode to the same bytes.
	if len(handle) != base64.RawURLEncoding.EncodedLen(receiptBytes) {
		return receipt{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(handle)
	if err != nil || len(b) != receiptBytes {
		return receipt{}, false
	}
	return receipt{
		queueID:  int64(binary.BigEndian.Uint64(b[0:8])),
		sequence: int64(binary.BigEndian.Uint64(b[8:16])),
		token:    b[16:],
	}, true
}

// receipts is a parsed settle request: the well-formed handles as parallel
// arrays for the ANY(...) statements, and which input each came from.
type receipts struct {
	handles   []string
	parsed    []receipt
	valid     []bool
	queueIDs  []int64
	sequences []int64
	tokens    [][]byte
}

func parseReceipts(handles []string) receipts {
	rs := receipts{handles: handles, parsed: make([]receipt, len(handles)), valid: make([]bool, len(handles))}
	for i, h := range handles {
		r, ok := parseReceipt(h)
		if !ok {
			continue
		}
		rs.parsed[i], rs.valid[i] = r, true
		rs.queueIDs = append(rs.queueIDs, r.queueID)
		rs.sequences = append(rs.sequences, r.sequence)
		rs.tokens = append(rs.tokens, r.token)
	}
	return rs
}

type rowKey struct{ queueID, sequence int64 }

// result reports, per input handle, whether its row was among those the
// statement changed.
func (rs receipts) result(changed map[rowKey]bool) SettleResult {
	var res SettleResult
	for i, h := range rs.handles {
		if rs.valid[i] && changed[rowKey{rs.parsed[i].queueID, rs.parsed[i].sequence}] {
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
