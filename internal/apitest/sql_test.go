package apitest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skipq/skipq/internal/service"
)

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestSQLSendCommittedAndRolledBack(t *testing.T) {
	n := newNode(t)
	conn := connect(t, n.DB)
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT skipq.send('outbox', 'rolled back')"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var id string
	var seq int64
	if err := conn.QueryRow(ctx, "SELECT * FROM skipq.send('outbox', 'hello')").Scan(&id, &seq); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT skipq.send('outbox', '{"id":7}'::jsonb, metadata => 'm', tags => '{"k":"v"}', client_id => 'app')`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT skipq.send('outbox', '\x00ff'::bytea)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT * FROM skipq.send_batch('outbox', ARRAY['b1', 'b2'])`); err != nil {
		t.Fatal(err)
	}
	msgs := n.receive(t, "outbox", map[string]any{"maxMessages": 10})
	if len(msgs) != 5 {
		t.Fatalf("received %d messages, want 5 (the rolled-back one must not exist): %v", len(msgs), msgs)
	}
	if msgs[0]["messageId"] != id || num(msgs[0]["sequence"]) != seq || msgs[0]["body"] != "hello" {
		t.Fatalf("first: %v (sent %s/%d)", msgs[0], id, seq)
	}
	if msgs[1]["body"] != `{"id": 7}` || msgs[1]["metadata"] != "m" || msgs[1]["clientId"] != "app" || msgs[1]["tags"].(map[string]any)["k"] != "v" {
		t.Fatalf("jsonb message: %v", msgs[1])
	}
	if msgs[2]["body"] != "AP8=" || msgs[2]["bodyEncoding"] != "base64" {
		t.Fatalf("bytea message: %v", msgs[2])
	}
	if msgs[3]["body"] != "b1" || msgs[4]["body"] != "b2" {
		t.Fatalf("batch: %v %v", msgs[3], msgs[4])
	}
}

func TestSQLSendValidation(t *testing.T) {
	n := newNode(t)
	conn := connect(t, n.DB)
	for _, stmt := range []string{
		"SELECT skipq.send('bad.', 'x')",
		"SELECT skipq.send('q', '')",
		"SELECT skipq.send('q', 'x', delay_seconds => -1)",
		"SELECT skipq.send('q', 'x', expiration_seconds => 1209601)",
		"SELECT skipq.send('q', 'x', message_id => 'has space')",
		`SELECT skipq.send('q', 'x', tags => '{"skipq.k":"v"}')`,
		`SELECT skipq.send('q', 'x', tags => '{"k":1}')`,
		"SELECT skipq.send('q', 'x', dead_letter_queue => 'a*')",
		"SELECT skipq.send('q', 'x', dead_letter_queue => 'q')", // its own dead-letter queue
		"SELECT skipq.send_batch('q', ARRAY[]::text[])",
	} {
		_, err := conn.Exec(context.Background(), stmt)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "22023" {
			t.Errorf("%s: got %v, want SQLSTATE 22023", stmt, err)
		}
	}
}

func TestSQLSendWakesWaitingReceiver(t *testing.T) {
	n := newNode(t)
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/wake", nil)
	got := n.receiveAsync(t, "wake", map[string]any{"waitSeconds": 30})
	waitForWaiters(t, n)
	conn := connect(t, n.DB)
	start := time.Now()
	if _, err := conn.Exec(context.Background(), "SELECT skipq.send('wake', 'from sql')"); err != nil {
		t.Fatal(err)
	}
	select {
	case msgs := <-got:
		if len(msgs) != 1 || msgs[0]["body"] != "from sql" {
			t.Fatalf("got %v", msgs)
		}
		t.Logf("woken %s after commit", time.Since(start))
	case <-time.After(20 * time.Second):
		t.Fatal("a committed SQL send did not wake the waiting receive")
	}
}

func TestSQLAndHTTPSendsShareIdempotencyKeys(t *testing.T) {
	n := newNode(t)
	conn := connect(t, n.DB)
	if _, err := conn.Exec(context.Background(), `SELECT skipq.send('d', 'same', tags => '{"b":"2","a":"1"}', message_id => 'k1')`); err != nil {
		t.Fatal(err)
	}
	r := n.must(t, http.StatusOK, "POST", "/v1/queues/d/messages", map[string]any{"body": "same", "messageId": "k1", "tags": map[string]any{"a": "1", "b": "2"}})
	if r["duplicate"] != true {
		t.Fatalf("HTTP resend of an SQL send: %v", r)
	}
	wantError(t, n.do(t, "POST", "/v1/queues/d/messages", map[string]any{"body": "other", "messageId": "k1"}), http.StatusConflict, "idempotency_conflict")
	_, err := conn.Exec(context.Background(), `SELECT skipq.send('d', 'other', message_id => 'k1')`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "22023" {
		t.Fatalf("SQL conflict: %v", err)
	}
}

func TestSQLProducerRoleMaySendAndNothingElse(t *testing.T) {
	n := newNode(t)
	conn := connect(t, n.DB)
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL ROLE skipq_producer"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT skipq.send('p', 'x')"); err != nil {
		t.Fatalf("producer cannot send: %v", err)
	}
	for _, stmt := range []string{
		"SELECT count(*) FROM skipq.messages",
		"DELETE FROM skipq.queues",
		"SELECT skipq.uuid_v7()",
	} {
		if _, err := tx.Exec(ctx, "SAVEPOINT s"); err != nil {
			t.Fatal(err)
		}
		_, err := tx.Exec(ctx, stmt)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("%s as skipq_producer: got %v, want permission denied", stmt, err)
		}
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT s"); err != nil {
			t.Fatal(err)
		}
	}
}

// The SQL API and the HTTP API accept the same queue names (docs/API.md#model): every
// Latin-1 character and every other character Go calls a space, inside a
// name, through skipq.check_queue_name (what skipq.send uses) and through
// service.ValidQueueName (what HTTP uses).
func TestSQLAndHTTPAgreeOnQueueNames(t *testing.T) {
	n := newNode(t)
	conn := connect(t, n.DB)
	var names []string
	for r := rune(1); r <= 0xff; r++ {
		names = append(names, "a"+string(r)+"b")
	}
	for _, r := range []rune{0x1680, 0x2000, 0x2005, 0x200a, 0x200b, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff, 'é', '中'} {
		names = append(names, "a"+string(r)+"b")
	}
	names = append(names, "orders.", "a*", "", strings.Repeat("x", 256), strings.Repeat("x", 257), strings.Repeat("é", 129))
	ctx := context.Background()
	for _, name := range names {
		httpOK := service.ValidQueueName(name) == ""
		_, err := conn.Exec(ctx, "SELECT skipq.check_queue_name('queue', $1)", name)
		var pgErr *pgconn.PgError
		if err != nil && (!errors.As(err, &pgErr) || pgErr.Code != "22023") {
			t.Fatalf("%q: %v", name, err)
		}
		if sqlOK := err == nil; sqlOK != httpOK {
			t.Errorf("%q (%U): HTTP accepts it: %v, SQL accepts it: %v", name, []rune(name), httpOK, sqlOK)
		}
	}
}
