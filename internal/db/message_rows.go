package db

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// messageColumns are skipq.messages' columns in the table's (and
// SkipqMessage's) order, as statements that return message rows select
// them.
const messageColumns = `queue_id, sequence, message_id, client_id, metadata, body, body_binary, tags, sent_at, visible_at,
       delayed_to, expires_at, receive_count, first_received_at, max_receive_count, dead_letter_queue,
       re_routed_from, dead_lettered_at, lease_token, ready, group_id`

// messageColumnTypes are the types of messageColumns, in their order.
var messageColumnTypes = [...]uint32{
	pgtype.Int8OID, pgtype.Int8OID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.ByteaOID,
	pgtype.BoolOID, pgtype.JSONBOID, pgtype.TimestamptzOID, pgtype.TimestamptzOID,
	pgtype.TimestamptzOID, pgtype.TimestamptzOID, pgtype.Int4OID, pgtype.TimestamptzOID, pgtype.Int4OID,
	pgtype.TextOID, pgtype.TextOID, pgtype.TimestamptzOID, pgtype.ByteaOID, pgtype.BoolOID, pgtype.TextOID,
}

// scanMessages reads rows of messageColumns, of which there are usually no
// more than hint, into SkipqMessages and closes rows. With claims not nil,
// each row has an integer column first (MessageClaimQueues's claim),
// appended to *claims. It reads the same values pgx's Scan would, with a
// few allocations for all the rows where Scan made one for each string,
// body, tags and nullable time of each row (and grew the slice from
// nothing): a claim of 100 made some 640. Every row's strings and byte
// slices are cut from shared blocks of memory (messageArena) and its
// nullable times point into shared slices, so a message keeps the others'
// bytes alive as long as it lives: these rows are read, answered and let
// go together. Numbers, booleans and times are decoded by pgx's own plans,
// the same as Scan's, into values reused from row to row.
func scanMessages(rows pgx.Rows, hint int, claims *[]int32) ([]SkipqMessage, error) {
	defer rows.Close()
	var s messageScanner
	if claims != nil {
		s.lead = 1
	}
	var out []SkipqMessage
	for rows.Next() {
		if out == nil {
			if err := s.plan(rows); err != nil {
				return nil, err
			}
			out = make([]SkipqMessage, 0, min(max(hint, 1), firstRows))
		}
		if len(out) == cap(out) {
			// Past the first rows, room for the rest of hint at once.
			out = append(make([]SkipqMessage, 0, max(hint, 2*len(out))), out...)
		}
		out = out[:len(out)+1]
		raw := rows.RawValues()
		if claims != nil && len(raw) > 0 {
			claim, err := s.int32(raw[0], nil)
			if err != nil {
				return nil, fmt.Errorf("message rows: %w", err)
			}
			*claims = append(*claims, claim)
		}
		if err := s.scan(raw[min(s.lead, len(raw)):], &out[len(out)-1], max(hint-len(out), 1)); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// firstRows is how many rows scanMessages makes room for before it knows
// there are more: a receive of up to 100 often finds a few.
const firstRows = 16

// messageScanner decodes the rows of one statement's result.
type messageScanner struct {
	lead    int // the integer columns ahead of messageColumns: 0 or 1
	formats [len(messageColumnTypes)]int16
	// The plans of pgx's Map for the result's number, boolean and time
	// columns in their formats, with the values they decode into.
	int8Plan, int4Plan, boolPlan, timePlan, bytesPlan pgtype.ScanPlan
	int8                                              int64
	int4                                              int32
	bool                                              bool
	time                                              pgtype.Timestamptz
	bytes                                             []byte
	arena                                             messageArena
}

// plan checks the result's columns against messageColumns and makes the
// plans for their formats: pgx asks for text and jsonb as text and the
// other types as binary; the simple protocol gets everything as text.
func (s *messageScanner) plan(rows pgx.Rows) error {
	fields := rows.FieldDescriptions()
	if len(fields) != s.lead+len(messageColumnTypes) {
		return fmt.Errorf("message rows: %d columns, want %d", len(fields), s.lead+len(messageColumnTypes))
	}
	if s.lead == 1 && (fields[0].DataTypeOID != pgtype.Int4OID || fields[0].Format != fields[s.lead+12].Format) {
		return fmt.Errorf("message rows: column %s is of type %d in format %d, want an integer as receive_count",
			fields[0].Name, fields[0].DataTypeOID, fields[0].Format)
	}
	fields = fields[s.lead:]
	for i, f := range fields {
		if f.DataTypeOID != messageColumnTypes[i] {
			return fmt.Errorf("message rows: column %s is of type %d, want %d", f.Name, f.DataTypeOID, messageColumnTypes[i])
		}
		s.formats[i] = f.Format
	}
	if s.formats[7] != pgtype.TextFormatCode {
		// pgx asks for jsonb as text; in binary it has a version byte first.
		return errors.New("message rows: tags (jsonb) not in text format")
	}
	m := rows.Conn().TypeMap()
	// Columns of one type share a plan, so they must share a format: pgx
	// asks for one format per type.
	s.int8Plan = m.PlanScan(pgtype.Int8OID, s.formats[0], &s.int8)
	s.int4Plan = m.PlanScan(pgtype.Int4OID, s.formats[12], &s.int4)
	s.boolPlan = m.PlanScan(pgtype.BoolOID, s.formats[6], &s.bool)
	s.timePlan = m.PlanScan(pgtype.TimestamptzOID, s.formats[8], &s.time)
	s.bytesPlan = m.PlanScan(pgtype.ByteaOID, s.formats[5], &s.bytes)
	for i, t := range messageColumnTypes {
		if j := firstOfType(t); s.formats[i] != s.formats[j] {
			return fmt.Errorf("message rows: columns %s and %s of one type in formats %d and %d",
				fields[j].Name, fields[i].Name, s.formats[j], s.formats[i])
		}
	}
	return nil
}

// firstOfType is the first of messageColumns of type oid.
func firstOfType(oid uint32) int {
	for i, t := range messageColumnTypes {
		if t == oid {
			return i
		}
	}
	return -1
}

// scan decodes one row's values into m; rowsLeft is how many more rows may
// follow it, for the size of the arena's next block.
func (s *messageScanner) scan(raw [][]byte, m *SkipqMessage, rowsLeft int) error {
	if len(raw) != len(messageColumnTypes) {
		return fmt.Errorf("message rows: %d values, want %d", len(raw), len(messageColumnTypes))
	}
	var err error
	m.QueueID, err = s.int64(raw[0], err)
	m.Sequence, err = s.int64(raw[1], err)
	// The row's strings and bytes in one block (text is sent as is in
	// either format, jsonb as its text; bytea in text format is decoded on
	// the way).
	bytea := func(i int) []byte {
		if s.formats[i] == pgtype.BinaryFormatCode || raw[i] == nil || err != nil {
			return raw[i]
		}
		err = s.bytesPlan.Scan(raw[i], &s.bytes)
		return s.bytes
	}
	body, token, tags := bytea(5), bytea(18), raw[7]
	if err != nil {
		return fmt.Errorf("message rows: %w", err)
	}
	s.arena.reserve(len(raw[2])+len(raw[3])+len(raw[4])+len(body)+len(tags)+len(raw[15])+len(raw[16])+len(token)+len(raw[20]), rowsLeft)
	m.MessageID, m.ClientID, m.Metadata = s.arena.string(raw[2]), s.arena.string(raw[3]), s.arena.string(raw[4])
	m.Body, m.Tags = s.arena.bytes(body), s.arena.bytes(tags)
	m.DeadLetterQueue, m.ReRoutedFrom = s.arena.string(raw[15]), s.arena.nullString(raw[16], rowsLeft)
	m.LeaseToken, m.GroupID = s.arena.bytes(token), s.arena.nullString(raw[20], rowsLeft)

	m.BodyBinary, err = s.boolean(raw[6], err)
	m.SentAt, err = s.timestamp(raw[8], err)
	m.VisibleAt, err = s.timestamp(raw[9], err)
	m.DelayedTo, err = s.nullTimestamp(raw[10], rowsLeft, err)
	m.ExpiresAt, err = s.nullTimestamp(raw[11], rowsLeft, err)
	m.ReceiveCount, err = s.int32(raw[12], err)
	m.FirstReceivedAt, err = s.nullTimestamp(raw[13], rowsLeft, err)
	m.MaxReceiveCount, err = s.int32(raw[14], err)
	m.DeadLetteredAt, err = s.nullTimestamp(raw[17], rowsLeft, err)
	m.Ready, err = s.boolean(raw[19], err)
	if err != nil {
		return fmt.Errorf("message rows: %w", err)
	}
	return nil
}

// The decoders below do nothing once err is set, and return it: scan
// checks once at the end.

func (s *messageScanner) int64(raw []byte, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	err = s.int8Plan.Scan(raw, &s.int8)
	return s.int8, err
}

func (s *messageScanner) int32(raw []byte, err error) (int32, error) {
	if err != nil {
		return 0, err
	}
	err = s.int4Plan.Scan(raw, &s.int4)
	return s.int4, err
}

func (s *messageScanner) boolean(raw []byte, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	err = s.boolPlan.Scan(raw, &s.bool)
	return s.bool, err
}

// timestamp decodes a timestamptz as Scan into a time.Time does: an
// infinite one is an error.
func (s *messageScanner) timestamp(raw []byte, err error) (time.Time, error) {
	if err != nil {
		return time.Time{}, err
	}
	if raw == nil {
		return time.Time{}, errors.New("a NULL timestamptz in a NOT NULL column")
	}
	if err := s.timePlan.Scan(raw, &s.time); err != nil {
		return time.Time{}, err
	}
	if s.time.InfinityModifier != pgtype.Finite {
		return time.Time{}, fmt.Errorf("cannot scan an infinite timestamptz (%v) into a time", s.time.InfinityModifier)
	}
	return s.time.Time, nil
}

// nullTimestamp is timestamp of a nullable column, its time in the arena's
// slice of times.
func (s *messageScanner) nullTimestamp(raw []byte, rowsLeft int, err error) (*time.Time, error) {
	if raw == nil || err != nil {
		return nil, err
	}
	t, err := s.timestamp(raw, nil)
	if err != nil {
		return nil, err
	}
	return s.arena.time(t, rowsLeft), nil
}

// messageArena hands out the strings, byte slices and times of a result's
// rows from blocks it allocates for several rows at once. Nothing that
// reads the rows writes to their bytes: they are answered as they are.
type messageArena struct {
	block   []byte
	times   []time.Time
	strings []string
}

// maxArenaBlock bounds a block made for the rows still to come; a single
// row larger than that gets a block of its own size.
const maxArenaBlock = 64 << 10

// reserve makes room for a row of n bytes, and for as many as rowsLeft
// more of that size (at most maxArenaBlock in all) should it need a new
// block.
func (a *messageArena) reserve(n, rowsLeft int) {
	if cap(a.block)-len(a.block) >= n {
		return
	}
	a.block = make([]byte, 0, max(n, min(n*min(rowsLeft+1, firstRows), maxArenaBlock)))
}

// bytes is a copy of raw in the block reserved for it (nil stays nil, and
// empty stays empty, as Scan reads them); appending to it copies.
func (a *messageArena) bytes(raw []byte) []byte {
	switch {
	case raw == nil:
		return nil
	case len(raw) == 0:
		return []byte{}
	}
	start := len(a.block)
	a.block = append(a.block, raw...)
	return a.block[start:len(a.block):len(a.block)]
}

func (a *messageArena) string(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	b := a.bytes(raw)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// nullString is a nullable string, in the arena's slice of strings; as
// nullTimestamp's times, there are at most two a row.
func (a *messageArena) nullString(raw []byte, rowsLeft int) *string {
	if raw == nil {
		return nil
	}
	if len(a.strings) == cap(a.strings) {
		a.strings = make([]string, 0, 2*min(rowsLeft+1, firstRows))
	}
	a.strings = append(a.strings, a.string(raw))
	return &a.strings[len(a.strings)-1]
}

// time is t in the arena's slice of times, which holds the nullable times
// of several rows (at most four a row).
func (a *messageArena) time(t time.Time, rowsLeft int) *time.Time {
	if len(a.times) == cap(a.times) {
		a.times = make([]time.Time, 0, 4*min(rowsLeft+1, firstRows))
	}
	a.times = append(a.times, t)
	return &a.times[len(a.times)-1]
}
