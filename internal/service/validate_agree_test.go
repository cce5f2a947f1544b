package service_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/testdb"
)

// A send is validated twice, by necessity: in Go for the HTTP API (every
// issue with its JSON path) and in PL/pgSQL for skipq.send, which runs
// without a node. Everything after validation is one implementation
// (skipq.message_insert). The two validators must refuse the same
// messages: each message here goes through both, and both must accept it,
// or the HTTP API answer 400/413 and SQL raise 22023. (Messages that SQL
// cannot even express -- a NUL in text, invalid UTF-8 or base64 -- are
// FuzzPrepareMessage's.)
func TestSQLAndHTTPSendsRefuseTheSameMessages(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	limits := service.DefaultLimits()
	limits.MaxMessageBytes, limits.MaxDelaySeconds, limits.MaxExpirationSeconds, limits.MaxReceiveCount = 64, 60, 120, 5
	svc := service.New(pool, service.Options{Limits: limits})
	if _, err := svc.PublishSQLLimits(ctx); err != nil {
		t.Fatal(err)
	}

	n := func(v int) *int { return &v }
	str := func(v string) *string { return &v }
	tags := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("k%d", i)] = "v"
		}
		return m
	}
	cases := []service.MessageInput{
		{Body: "plain"},
		{Body: "", Metadata: "only metadata"},
		{Body: ""},
		{Body: strings.Repeat("a", 64)},
		{Body: strings.Repeat("a", 65)},
		{Body: strings.Repeat("a", 60), Metadata: "abcd"},
		{Body: strings.Repeat("a", 60), Metadata: "abcde"},
		{Body: base64.StdEncoding.EncodeToString([]byte{0, 1, 2}), BodyEncoding: "base64"},
		{Body: base64.StdEncoding.EncodeToString(make([]byte, 65)), BodyEncoding: "base64"},
		{Body: "x", Tags: map[string]string{"ok.key-1_": "v"}},
		{Body: "x", Tags: map[string]string{"bad key": "v"}},
		{Body: "x", Tags: map[string]string{"skipq.reserved": "v"}},
		{Body: "x", Tags: map[string]string{strings.Repeat("k", 64): "v"}},
		{Body: "x", Tags: map[string]string{strings.Repeat("k", 65): "v"}},
		{Body: "x", Tags: map[string]string{"k": strings.Repeat("v", 1024)}},
		{Body: "x", Tags: map[string]string{"k": strings.Repeat("v", 1025)}},
		{Body: "x", Tags: map[string]string{"k": "é"}},
		{Body: "x", Tags: tags(32)},
		{Body: "x", Tags: tags(33)},
		{Body: "x", DelaySeconds: n(0)},
		{Body: "x", DelaySeconds: n(60)},
		{Body: "x", DelaySeconds: n(61)},
		{Body: "x", DelaySeconds: n(-1)},
		{Body: "x", ExpirationSeconds: n(120)},
		{Body: "x", ExpirationSeconds: n(121)},
		{Body: "x", ExpirationSeconds: n(-1)},
		{Body: "x", MaxReceiveCount: n(0)},
		{Body: "x", MaxReceiveCount: n(5)},
		{Body: "x", MaxReceiveCount: n(6)},
		{Body: "x", MaxReceiveCount: n(-1)},
		{Body: "x", DeadLetterQueue: str("")},
		{Body: "x", DeadLetterQueue: str("agree.dlq")},
		{Body: "x", DeadLetterQueue: str("agree")},
		{Body: "x", DeadLetterQueue: str("a b")},
		{Body: "x", DeadLetterQueue: str("a\u00a0b")},
		{Body: "x", DeadLetterQueue: str("dlq.")},
		{Body: "x", DeadLetterQueue: str("a*b")},
		{Body: "x", DeadLetterQueue: str(strings.Repeat("d", 257))},
		{Body: "x", MessageID: "order-1:a.b_c"},
		{Body: "x", MessageID: "bad id"},
		{Body: "x", MessageID: strings.Repeat("i", 128)},
		{Body: "x", MessageID: strings.Repeat("i", 129)},
		{Body: "x", ClientID: strings.Repeat("c", 256)},
		{Body: "x", ClientID: strings.Repeat("c", 257)},
	}
	for i, in := range cases {
		_, httpErr := svc.Send(ctx, "default", "agree", in)
		sqlErr := sqlSend(ctx, pool, "agree", in)
		if (httpErr == nil) != (sqlErr == nil) {
			t.Errorf("case %d %+v: HTTP says %v, SQL says %v", i, in, httpErr, sqlErr)
			continue
		}
		if httpErr == nil {
			continue
		}
		if k := service.KindOf(httpErr); k != service.KindInvalid && k != service.KindTooLarge {
			t.Errorf("case %d: HTTP refused with %v, want 400 or 413", i, httpErr)
		}
		var pgErr *pgconn.PgError
		if !errors.As(sqlErr, &pgErr) || pgErr.Code != "22023" {
			t.Errorf("case %d: SQL refused with %v, want SQLSTATE 22023", i, sqlErr)
		}
	}
}

// sqlSend sends in through skipq.send, in a transaction rolled back after.
func sqlSend(ctx context.Context, pool *pgxpool.Pool, queue string, in service.MessageInput) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var body any = in.Body
		cast := "text"
		if in.BodyEncoding == "base64" {
			b, err := base64.StdEncoding.DecodeString(in.Body)
			if err != nil {
				return err
			}
			body, cast = b, "bytea"
		}
		var messageID *string
		if in.MessageID != "" {
			messageID = &in.MessageID
		}
		tags := in.Tags
		if tags == nil {
			tags = map[string]string{}
		}
		_, err := tx.Exec(ctx, `SELECT skipq.send(queue => $1, body => $2::`+cast+`, metadata => $3, tags => $4,
			delay_seconds => $5, expiration_seconds => $6, max_receive_count => $7, dead_letter_queue => $8,
			message_id => $9, client_id => $10)`,
			queue, body, in.Metadata, tags, in.DelaySeconds, in.ExpirationSeconds, in.MaxReceiveCount,
			in.DeadLetterQueue, messageID, in.ClientID)
		if err != nil {
			return err
		}
		return errRollback
	})
	if errors.Is(err, errRollback) {
		return nil
	}
	return err
}

var errRollback = errors.New("rolled back on purpose")
