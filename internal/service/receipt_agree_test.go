package service

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/testdb"
)

// A receipt handle is parsed by the node (parseReceipt) and, for SQL
// consumers, by skipq.receipt_parse and skipq.receipts_parse. The three
// must take the same handles to the same (queue, sequence, token) and
// refuse the same others: each handle here goes through all three.
func TestReceiptParsersAgree(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	rng := rand.New(rand.NewPCG(1, 2))
	var handles []string
	for range 50 {
		b := make([]byte, receiptBytes)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		h := base64.RawURLEncoding.EncodeToString(b)
		handles = append(handles, h,
			h[:63], h+"A", h[:63]+"=", h[:62]+"==", h[:63]+" ", h[:63]+"\n", h[:32]+"\r\n"+h[34:],
			h[:63]+"+", h[:63]+"/", h[:62]+"é", h[:61]+"é", h[:63]+"[", h[:63]+"^", h[:63]+`\`,
			strings.ToUpper(h), base64.StdEncoding.EncodeToString(b))
	}
	handles = append(handles, "", strings.Repeat("A", 64), strings.Repeat("_", 64), strings.Repeat("-", 64),
		strings.Repeat("é", 32))

	inList := map[string]receipt{}
	rows, err := pool.Query(ctx, "SELECT handle, queue_id, sequence, token FROM skipq.receipts_parse($1)", handles)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var h string
		var r receipt
		if err := rows.Scan(&h, &r.queueID, &r.sequence, &r.token); err != nil {
			t.Fatal(err)
		}
		inList[h] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	accepted := 0
	for _, h := range handles {
		goR, goOK := parseReceipt(h)
		var one receipt
		err := pool.QueryRow(ctx, "SELECT queue_id, sequence, token FROM skipq.receipt_parse($1)", h).
			Scan(&one.queueID, &one.sequence, &one.token)
		var pgErr *pgconn.PgError
		oneOK := err == nil
		if err != nil && (!errors.As(err, &pgErr) || pgErr.Code != "SQ404") {
			t.Fatalf("receipt_parse(%q): %v", h, err)
		}
		listR, listOK := inList[h]
		if goOK != oneOK || goOK != listOK {
			t.Errorf("%q: the node takes it %v, receipt_parse %v, receipts_parse %v", h, goOK, oneOK, listOK)
			continue
		}
		if !goOK {
			continue
		}
		accepted++
		for _, r := range []receipt{one, listR} {
			if r.queueID != goR.queueID || r.sequence != goR.sequence || !bytes.Equal(r.token, goR.token) {
				t.Errorf("%q: the node reads %+v, SQL %+v", h, goR, r)
			}
		}
	}
	if accepted < 50 {
		t.Fatalf("only %d handles were well-formed: the inputs do not test acceptance", accepted)
	}
}
