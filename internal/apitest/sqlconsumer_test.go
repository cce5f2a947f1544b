package apitest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/node"
)

// The SQL consumer API (docs/SQL.md, "Consuming in SQL"): the ack
// commits with the caller's work or not at all, fenced by the delivery.

// sqlState is err's SQLSTATE ("" when it has none).
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// effects is a table of the work a consumer commits with its ack.
func effects(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), "CREATE TABLE effects (message_id text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
}

func countEffects(t *testing.T, conn *pgx.Conn, id string) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM effects WHERE message_id = $1", id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// workAndAck is a consumer's transaction: the work (an effect row), then
// skipq.ack of the handle, then COMMIT (or ROLLBACK when rollback is set).
// It returns the first error.
func workAndAck(ctx context.Context, conn *pgx.Conn, id, handle string, rollback bool) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "INSERT INTO effects VALUES ($1)", id); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "SELECT skipq.ack($1)", handle); err != nil {
		return err
	}
	if rollback {
		return tx.Rollback(ctx)
	}
	return tx.Commit(ctx)
}

// Checks 1 and 2: rolled back, the ack never happened (the handle still
// settles over HTTP); committed, the work is there and the handle is stale.
func TestSQLAckCommitsOrRollsBackWithTheWork(t *testing.T) {
	n := newNode(t)
	conn := connect(t, n.DB)
	ctx := context.Background()
	effects(t, conn)

	n.send(t, "work", map[string]any{"body": "a"})
	m := n.receive(t, "work", nil)[0]
	id, h := m["messageId"].(string), m["receiptHandle"].(string)
	if err := workAndAck(ctx, conn, id, h, true); err != nil {
		t.Fatal(err)
	}
	if countEffects(t, conn, id) != 0 {
		t.Fatal("a rolled-back transaction's work is there")
	}
	n.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": h})

	n.send(t, "work", map[string]any{"body": "b"})
	m = n.receive(t, "work", nil)[0]
	id, h = m["messageId"].(string), m["receiptHandle"].(string)
	if err := workAndAck(ctx, conn, id, h, false); err != nil {
		t.Fatal(err)
	}
	if countEffects(t, conn, id) != 1 {
		t.Fatal("the committed work is missing")
	}
	wantError(t, n.do(t, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": h}), http.StatusNotFound, "receipt_stale")
}

// Check 3: the work of a delivery whose lease ran out and whose message was
// received again cannot commit: its ack raises SQ404 and takes the work down
// with it; the current delivery's ack succeeds.
func TestSQLAckOfAStaleDeliveryAbortsTheWork(t *testing.T) {
	n := newNode(t)
	conn := connect(t, n.DB)
	ctx := context.Background()
	effects(t, conn)
	n.send(t, "stale", map[string]any{"body": "x"})
	first := n.receive(t, "stale", map[string]any{"visibilitySeconds": 1})[0]
	var second map[string]any
	eventually(t, 10*time.Second, "the message back after its 1 s lease", func() bool {
		got := n.receive(t, "stale", map[string]any{"waitSeconds": 1})
		if len(got) == 1 {
			second = got[0]
		}
		return second != nil
	})
	id := first["messageId"].(string)
	err := workAndAck(ctx, conn, id, first["receiptHandle"].(string), false)
	if sqlState(err) != "SQ404" {
		t.Fatalf("the stale delivery's ack gave %v, want SQLSTATE SQ404", err)
	}
	if countEffects(t, conn, id) != 0 {
		t.Fatal("the stale delivery's work committed")
	}
	if err := workAndAck(ctx, conn, id, second["receiptHandle"].(string), false); err != nil {
		t.Fatalf("the current delivery's ack: %v", err)
	}
	if countEffects(t, conn, id) != 1 {
		t.Fatal("the current delivery's work is missing")
	}
}

// waitForBlockedAck waits until a session of this database waits on a lock.
func waitForBlockedAck(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	eventually(t, 10*time.Second, "the second ack to wait for the first's lock", func() bool {
		var waiting int
		err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		return err == nil && waiting > 0
	})
}

// Check 5: two transactions ack one delivery. The second waits for the
// first; the first commits and the second gets SQ404 -- or the first rolls
// back and the second acks.
func TestSQLConcurrentAcksOfOneDelivery(t *testing.T) {
	n := newNode(t)
	ctx := context.Background()
	monitor := connect(t, n.DB)
	for _, firstCommits := range []bool{true, false} {
		n.send(t, "race", map[string]any{"body": "x"})
		h := n.receive(t, "race", nil)[0]["receiptHandle"].(string)
		a, b := connect(t, n.DB), connect(t, n.DB)
		txA, err := a.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := txA.Exec(ctx, "SELECT skipq.ack($1)", h); err != nil {
			t.Fatal(err)
		}
		second := make(chan error, 1)
		go func() {
			_, err := b.Exec(ctx, "SELECT skipq.ack($1)", h)
			second <- err
		}()
		waitForBlockedAck(t, monitor)
		if firstCommits {
			err = txA.Commit(ctx)
		} else {
			err = txA.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		err = <-second
		switch {
		case firstCommits && sqlState(err) != "SQ404":
			t.Fatalf("after the first ack committed, the second gave %v, want SQ404", err)
		case !firstCommits && err != nil:
			t.Fatalf("after the first ack rolled back, the second gave %v, want success", err)
		}
	}
}

// Check 4, and the worker's part of it: a delivery acked inside a
// transaction is reserved until the transaction ends, though its lease runs
// out meanwhile (no receive gets it); when the transaction rolls back, the
// message comes back (the worker, which passed it over while it was locked,
// files its timer again) with its second delivery.
func TestSQLAckReservesTheMessageUntilTheTransactionEnds(t *testing.T) {
	n := newNode(t)
	conn := connect(t, n.DB)
	ctx := context.Background()
	n.send(t, "reserve", map[string]any{"body": "x"})
	m := n.receive(t, "reserve", map[string]any{"visibilitySeconds": 1})[0]
	h := m["receiptHandle"].(string)
	leaseEnd, err := time.Parse(time.RFC3339Nano, m["visibleUntil"].(string))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT skipq.ack($1)", h); err != nil {
		t.Fatal(err)
	}
	// The worker fires the lease's timer, passes the locked message over
	// and files its timer again, after the lease's end.
	monitor := connect(t, n.DB)
	eventually(t, 10*time.Second, "the worker to file the lease's timer again", func() bool {
		var refiled bool
		err := monitor.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM skipq.timers WHERE due_at > $1::timestamptz + interval '0.5 s')`, leaseEnd).Scan(&refiled)
		return err == nil && refiled
	})
	if got := n.receive(t, "reserve", map[string]any{"waitSeconds": 1}); len(got) != 0 {
		t.Fatalf("a receive got the reserved message: %v", got)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	eventually(t, 10*time.Second, "the message back after the rollback", func() bool {
		if got := n.receive(t, "reserve", map[string]any{"waitSeconds": 1}); len(got) == 1 {
			back = got[0]
		}
		return back != nil
	})
	if num(back["receiveCount"]) != 2 {
		t.Fatalf("the message came back as delivery %v, want 2", back["receiveCount"])
	}
}

// Check 7: a receive in a transaction that rolls back never happened: the
// receive count stays 0 however often, so a poison message never reaches
// its limit that way (docs/SQL.md says so); over HTTP (autocommit) it does.
func TestSQLReceiveRolledBackIsNoDelivery(t *testing.T) {
	n := newNode(t)
	conn := connect(t, n.DB)
	ctx := context.Background()
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/poison", map[string]any{"maxReceiveCount": 3, "deadLetterQueue": "poison.dlq"})
	n.send(t, "poison", map[string]any{"body": "x"})
	for range 5 {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var count int
		if err := tx.QueryRow(ctx, "SELECT receive_count FROM skipq.receive('poison')").Scan(&count); err != nil {
			t.Fatal(err)
		}
		if count != 1 {
			t.Fatalf("a rolled-back receive was counted: this delivery is number %d", count)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		m := n.receive(t, "poison", nil)[0]
		n.must(t, http.StatusOK, "POST", "/v1/receipts/nack", map[string]any{"receiptHandle": m["receiptHandle"]})
	}
	if got := n.receive(t, "poison", map[string]any{"waitSeconds": 0}); len(got) != 0 {
		t.Fatalf("the message is still in its queue after three HTTP deliveries: %v", got)
	}
	if got := n.receive(t, "poison.dlq", nil); len(got) != 1 {
		t.Fatalf("the dead-letter queue holds %d messages, want 1", len(got))
	}
}

// Check 8: a role granted skipq_consumer receives and settles, and may do
// nothing else: not read the tables, not send.
func TestSQLConsumerRoleMayOnlyReceiveAndSettle(t *testing.T) {
	n := newNode(t)
	ctx := context.Background()
	_, consumerURL := loginRole(t, n.DB, "skipq_consumer")
	consumer := connect(t, consumerURL)
	n.send(t, "jobs", map[string]any{"body": "x"})
	var h string
	if err := consumer.QueryRow(ctx, "SELECT receipt_handle FROM skipq.receive('jobs', visibility_seconds => 30)").Scan(&h); err != nil {
		t.Fatal(err)
	}
	var until time.Time
	if err := consumer.QueryRow(ctx, "SELECT skipq.set_visibility($1, 60)", h).Scan(&until); err != nil {
		t.Fatal(err)
	}
	if _, err := consumer.Exec(ctx, "SELECT skipq.ack($1)", h); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		"SELECT * FROM skipq.messages",
		"SELECT skipq.send('jobs', 'x')",
		"SELECT * FROM skipq.message_ack('{}', '{}', '{}')",
	} {
		_, err := consumer.Exec(ctx, stmt)
		wantSQLState(t, stmt, err, "42501")
	}
}

// Check 9: under REPEATABLE READ, acking a delivery whose message another
// session re-claimed after the snapshot was taken is a serialization
// failure (40001); the retry then finds the handle stale.
func TestSQLAckUnderRepeatableReadAfterAReclaim(t *testing.T) {
	n := newNode(t)
	conn := connect(t, n.DB)
	ctx := context.Background()
	n.send(t, "rr", map[string]any{"body": "x"})
	h := n.receive(t, "rr", map[string]any{"visibilitySeconds": 1})[0]["receiptHandle"].(string)
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// The transaction's snapshot is taken by its first query.
	if _, err := tx.Exec(ctx, "SELECT count(*) FROM pg_class"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "another receive of the message after its 1 s lease", func() bool {
		return len(n.receive(t, "rr", map[string]any{"waitSeconds": 1})) == 1
	})
	_, err = tx.Exec(ctx, "SELECT skipq.ack($1)", h)
	if sqlState(err) != "40001" {
		t.Fatalf("the ack after a re-claim under REPEATABLE READ gave %v, want 40001", err)
	}
	_ = tx.Rollback(ctx)
	_, err = conn.Exec(ctx, "SELECT skipq.ack($1)", h)
	if sqlState(err) != "SQ404" {
		t.Fatalf("the retry gave %v, want SQ404", err)
	}
}

// The handles are the HTTP API's, both ways; the list ack is all or
// nothing; try_ack reports what settled; bad arguments are 22023 and bad
// handles SQ404.
func TestSQLConsumerFunctions(t *testing.T) {
	n := newNode(t)
	conn := connect(t, n.DB)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, n.DB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	if rows := sqlReceive(t, conn, "SELECT receipt_handle, message_id FROM skipq.receive('nothing.here')"); len(rows) != 0 {
		t.Fatalf("a missing queue gave %v", rows)
	}
	for i := range 4 {
		n.send(t, "both", map[string]any{"body": string(rune('a' + i)), "tags": map[string]string{"k": "v"}})
	}
	// Received in SQL, in sequence order, acked over HTTP.
	var handle, body string
	var count int
	var tags map[string]string
	err = conn.QueryRow(ctx, `SELECT receipt_handle, convert_from(body, 'UTF8'), receive_count, tags
		FROM skipq.receive('both', max_messages => 1)`).Scan(&handle, &body, &count, &tags)
	if err != nil || body != "a" || count != 1 || tags["k"] != "v" {
		t.Fatalf("SQL receive: %q %d %v (%v)", body, count, tags, err)
	}
	n.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": handle})

	// Received over HTTP, settled in SQL.
	msgs := n.receive(t, "both", map[string]any{"maxMessages": 3})
	hs := []string{msgs[0]["receiptHandle"].(string), msgs[1]["receiptHandle"].(string), msgs[2]["receiptHandle"].(string)}
	_, err = conn.Exec(ctx, "SELECT skipq.ack($1::text[])", []string{hs[0], handle})
	if sqlState(err) != "SQ404" {
		t.Fatalf("a list with a stale handle gave %v, want SQ404", err)
	}
	var settled []string
	rows, err := conn.Query(ctx, "SELECT * FROM skipq.try_ack($1)", []string{hs[0], handle, "not a handle", hs[0]})
	if err == nil {
		settled, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || len(settled) != 1 || settled[0] != hs[0] {
		t.Fatalf("try_ack settled %v (%v), want only %s: the list ack before must have settled nothing", settled, err, hs[0])
	}
	var acked int
	if err := conn.QueryRow(ctx, "SELECT skipq.ack($1::text[])", hs[1:]).Scan(&acked); err != nil || acked != 2 {
		t.Fatalf("list ack: %d (%v)", acked, err)
	}

	for stmt, code := range map[string]string{
		"SELECT skipq.ack('not a handle')":                             "SQ404",
		"SELECT skipq.ack('" + handle + "')":                           "SQ404",
		"SELECT skipq.ack(NULL::text)":                                 "SQ404",
		"SELECT skipq.set_visibility('" + handle + "', 10)":            "SQ404",
		"SELECT skipq.set_visibility('" + handle + "', 0)":             "SQ404",
		"SELECT skipq.set_visibility('" + handle + "', -1)":            "22023",
		"SELECT skipq.nack('" + handle + "')":                          "SQ404",
		"SELECT * FROM skipq.receive('both', max_messages => 0)":       "22023",
		"SELECT * FROM skipq.receive('both', visibility_seconds => 0)": "22023",
		"SELECT * FROM skipq.receive('bad name')":                      "22023",
		"SELECT skipq.ack('{}'::text[])":                               "22023",
	} {
		_, err := pool.Exec(ctx, stmt)
		if sqlState(err) != code {
			t.Errorf("%s: %v, want SQLSTATE %s", stmt, err, code)
		}
	}
}

func sqlReceive(t *testing.T, conn *pgx.Conn, query string) [][]any {
	t.Helper()
	rows, err := conn.Query(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]any
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Check 6, scaled to the suite: consumers whose work often outlasts a 1 s
// lease, each committing an effect row (no unique constraint) with
// skipq.ack in one transaction and dropping the delivery on any error. The
// fence must leave each message's effect exactly once, though leases ran
// out mid-work and messages were delivered again.
func TestSQLAckExactlyOnceEffectsUnderExpiringLeases(t *testing.T) {
	if os.Getenv("SKIPQ_TEST_PGBOUNCER") == "1" {
		t.Skip("the consumers' SQL goes straight to PostgreSQL; the first pass covered it")
	}
	n := newNode(t)
	ctx := context.Background()
	effects(t, connect(t, n.DB))
	const messages, consumers = 120, 8
	batch := make([]map[string]any, messages)
	for i := range batch {
		batch[i] = map[string]any{"body": fmt.Sprint(i)}
	}
	n.must(t, http.StatusCreated, "POST", "/v1/queues/soak/messages/batch", map[string]any{"messages": batch})

	var redeliveries, stale atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(2 * time.Minute)
	for c := range consumers {
		conn := connect(t, n.DB)
		rnd := rand.New(rand.NewPCG(uint64(c), 7))
		wg.Go(func() {
			t := offTest{t}
			for time.Now().Before(deadline) {
				got := n.receive(t, "soak", map[string]any{"visibilitySeconds": 1, "waitSeconds": 1})
				if len(got) == 0 {
					if remaining(t, n, "soak") == 0 {
						return
					}
					continue
				}
				m := got[0]
				if num(m["receiveCount"]) > 1 {
					redeliveries.Add(1)
				}
				time.Sleep(time.Duration(rnd.IntN(1500)) * time.Millisecond) // the work
				err := workAndAck(ctx, conn, m["messageId"].(string), m["receiptHandle"].(string), false)
				switch {
				case sqlState(err) == "SQ404":
					stale.Add(1)
				case err != nil:
					t.Errorf("consumer %d: %v", c, err)
					return
				}
			}
		})
	}
	wg.Wait()
	var total, distinct int
	err := connect(t, n.DB).QueryRow(ctx, "SELECT count(*), count(DISTINCT message_id) FROM effects").Scan(&total, &distinct)
	if err != nil {
		t.Fatal(err)
	}
	if total != messages || distinct != messages || remaining(t, n, "soak") != 0 {
		t.Fatalf("%d effects of %d messages (%d distinct), %d left in the queue; want each once and none left",
			total, messages, distinct, remaining(t, n, "soak"))
	}
	if redeliveries.Load() == 0 || stale.Load() == 0 {
		t.Fatalf("no lease ran out mid-work (%d redeliveries, %d stale acks): the run proved nothing", redeliveries.Load(), stale.Load())
	}
	t.Logf("%d redeliveries, %d acks refused as stale", redeliveries.Load(), stale.Load())
}

// remaining is how many messages a queue still holds, in any state.
func remaining(t testing.TB, n *testNode, queue string) int64 {
	stats := n.must(t, http.StatusOK, "GET", "/v1/queues/"+queue, nil)["stats"].(map[string]any)
	return num(stats["available"]) + num(stats["inFlight"]) + num(stats["delayed"])
}

// skipq.nack and a release (set_visibility 0) settle in the caller's
// transaction: rolled back, the delivery stands; committed, the message is
// available at once and a receiver already waiting over HTTP wakes at the
// commit; a last delivery goes to its dead-letter queue in the same
// transaction.
func TestSQLNackAndRelease(t *testing.T) {
	n := newNode(t)
	conn := connect(t, n.DB)
	ctx := context.Background()
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/retry", map[string]any{"maxReceiveCount": 2, "deadLetterQueue": "retry.dlq"})
	n.send(t, "retry", map[string]any{"body": "x"})
	h := n.receive(t, "retry", nil)[0]["receiptHandle"].(string)

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT skipq.nack($1)", h); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Still in flight under the same handle: a receive finds nothing.
	if got := n.receive(t, "retry", map[string]any{"waitSeconds": 0}); len(got) != 0 {
		t.Fatalf("a rolled-back nack released the message: %v", got)
	}
	waiting := n.receiveAsync(t, "retry", map[string]any{"waitSeconds": 20})
	eventually(t, 10*time.Second, "the receive to wait", func() bool {
		return metricValue(t, n, "skipq_longpoll_waiters") == 1
	})
	var released time.Time
	if err := conn.QueryRow(ctx, "SELECT skipq.set_visibility($1, 0)", h).Scan(&released); err != nil {
		t.Fatal(err)
	}
	got := <-waiting
	if len(got) != 1 || num(got[0]["receiveCount"]) != 2 {
		t.Fatalf("the waiting receive got %v, want the released message's second delivery", got)
	}
	// Its last allowed delivery: the nack dead-letters it at once.
	if _, err := conn.Exec(ctx, "SELECT skipq.nack($1)", got[0]["receiptHandle"]); err != nil {
		t.Fatal(err)
	}
	if dl := n.receive(t, "retry.dlq", map[string]any{"waitSeconds": 0}); len(dl) != 1 || dl[0]["reRoutedFrom"] != "retry" {
		t.Fatalf("the dead-letter queue holds %v", dl)
	}
}

// skipq.requeue moves the delivery's message to another queue (created if
// missing) when the caller's transaction commits, waking a receiver waiting
// there; rolled back, the delivery stands.
func TestSQLRequeue(t *testing.T) {
	n := newNode(t)
	conn := connect(t, n.DB)
	ctx := context.Background()
	n.send(t, "inbox", map[string]any{"body": "x", "tags": map[string]string{"k": "v"}})
	h := n.receive(t, "inbox", nil)[0]["receiptHandle"].(string)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT skipq.requeue($1, 'parked')", h); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	waiting := n.receiveAsync(t, "parked", map[string]any{"waitSeconds": 20})
	if _, err := conn.Exec(ctx, "SELECT skipq.requeue($1, 'parked')", h); err != nil {
		t.Fatalf("requeue after the rolled-back one: %v", err)
	}
	got := <-waiting
	if len(got) != 1 || got[0]["reRoutedFrom"] != "inbox" || num(got[0]["receiveCount"]) != 1 ||
		got[0]["tags"].(map[string]any)["k"] != "v" {
		t.Fatalf("the destination's receive got %v", got)
	}
	wantError(t, n.do(t, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": h}), http.StatusNotFound, "receipt_stale")
	for stmt, code := range map[string]string{
		"SELECT skipq.requeue('" + h + "', 'parked')":   "SQ404",
		"SELECT skipq.requeue('" + h + "', 'bad name')": "22023",
	} {
		_, err := conn.Exec(ctx, stmt)
		if sqlState(err) != code {
			t.Errorf("%s: %v, want SQLSTATE %s", stmt, err, code)
		}
	}
}

// skipq_consumer may execute exactly the consumer functions (docs/SQL.md):
// not a send, not the internal functions they wrap.
func TestSQLConsumerMayExecuteOnlyTheConsumerFunctions(t *testing.T) {
	n := newNode(t)
	consumer, _ := loginRole(t, n.DB, "skipq_consumer")
	want := []string{
		"skipq.ack(text)",
		"skipq.ack(text[])",
		"skipq.nack(text,text)",
		"skipq.receive(text,integer,integer,integer,text)",
		"skipq.requeue(text,text)",
		"skipq.set_visibility(text,integer)",
		"skipq.try_ack(text[])",
	}
	if got := executableBy(t, connect(t, n.DB), consumer); !slices.Equal(got, want) {
		t.Errorf("a skipq_consumer may execute\n  %s\nwant exactly\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// An SQL ack of a FIFO group's head wakes the group's queue at commit, as
// the HTTP ack does: a notification from "sql" for the queue is published
// when the acking transaction commits, and a receive parked on a node
// without a worker gets the group's next message. Each round settles one
// way (one handle, a list, try_ack, a requeue to another queue, which
// wakes the queue it leaves too) and waits 2 s, which only a wake-up meets
// reliably: without one, the message would reach the receive through the
// hub's safety recheck (every 5 s while the listener is up), which four
// rounds in a row cannot all meet by chance.
func TestSQLAckOfAGroupHeadWakesWaitingReceivers(t *testing.T) {
	n := newNode(t, func(c *node.Config) { c.Role = node.RoleAPI })
	ctx := context.Background()
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/w", map[string]any{"fifo": true})
	acks := []string{"SELECT skipq.ack($1::text)", "SELECT skipq.ack(ARRAY[$1::text])", "SELECT skipq.try_ack(ARRAY[$1::text])",
		"SELECT skipq.requeue($1::text, 'elsewhere')"}
	for i := range len(acks) + 1 {
		n.send(t, "w", map[string]any{"body": fmt.Sprint(i), "groupId": "g"})
	}
	var queueID int64
	consumer := connect(t, n.DB)
	if err := consumer.QueryRow(ctx, "SELECT id FROM skipq.queues WHERE name = 'w'").Scan(&queueID); err != nil {
		t.Fatal(err)
	}
	listener := connect(t, n.DB)
	if _, err := listener.Exec(ctx, "LISTEN skipq_wake"); err != nil {
		t.Fatal(err)
	}
	var handle, body string
	if err := consumer.QueryRow(ctx, "SELECT receipt_handle, convert_from(body, 'UTF8') FROM skipq.receive('w')").Scan(&handle, &body); err != nil {
		t.Fatal(err)
	}
	for i, ack := range acks {
		if body != fmt.Sprint(i) {
			t.Fatalf("round %d: holding message %s", i, body)
		}
		waiting := n.receiveAsync(t, "w", map[string]any{"waitSeconds": 2})
		waitForWaiters(t, n)
		tx, err := consumer.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, ack, handle); err != nil {
			t.Fatalf("%s: %v", ack, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		awaitSQLWake(t, listener, queueID)
		got := <-waiting
		if len(got) != 1 || got[0]["body"] != fmt.Sprint(i+1) {
			t.Fatalf("%s: the waiting receive got %v, want message %d", ack, got, i+1)
		}
		// The next round acks the message this receive holds (an HTTP
		// handle settles in SQL too).
		handle, body = got[0]["receiptHandle"].(string), got[0]["body"].(string)
	}
}

// awaitSQLWake waits (up to 10 s, generously) for the SQL API's wake-up of
// queueID; nodes' own notifications are passed over.
func awaitSQLWake(t *testing.T, listener *pgx.Conn, queueID int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	want := fmt.Sprintf("sql %d ", queueID)
	for {
		note, err := listener.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("no wake-up of queue %d from SQL: %v", queueID, err)
		}
		if strings.HasPrefix(note.Payload, want) {
			return
		}
	}
}
