package bench

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/node"
)

// sqlConsumerApp names the SQL consumer scenario's connections.
const sqlConsumerApp = "skipq-bench-sql"

// sqlConsumerWorkload is the lifecycle with consumers in SQL, as an
// application that shares skipq's database would consume (docs/SQL.md,
// pattern 1 with no work in between): skipq.receive, then skipq.ack (the
// list form for a batch), each call its own transaction. Producers send
// over HTTP, as producers elsewhere would: skipq.send from many concurrent
// transactions serializes their commits on PostgreSQL's NOTIFY lock (one
// NOTIFY per call, needed to wake receivers at commit), which would measure
// that, not the consumer. A consumer that finds nothing waits for a
// producer's signal (or 100 ms), as the raw baseline's does: SQL has no
// long poll.
type sqlConsumerWorkload struct {
	pool    *pgxpool.Pool
	senders []*sender
	queue   string
	batch   int
	avail   chan struct{}
}

func (w *sqlConsumerWorkload) produce(ctx context.Context, i int) (int, error) {
	if err := w.senders[i].send(ctx); err != nil {
		return 0, err
	}
	announceSend(w.avail)
	return w.batch, nil
}

func (w *sqlConsumerWorkload) consume(ctx context.Context, _ int) (int, error) {
	rows, err := w.pool.Query(ctx, "SELECT receipt_handle, body FROM skipq.receive($1, $2)", w.queue, w.batch)
	if err != nil {
		return 0, err
	}
	type received struct {
		Handle string
		Body   []byte
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[received])
	if err != nil {
		return 0, err
	}
	if len(got) == 0 {
		awaitSend(ctx, w.avail)
		return 0, nil
	}
	if len(got) == 1 {
		_, err := w.pool.Exec(ctx, "SELECT skipq.ack($1::text)", got[0].Handle)
		return 1, err
	}
	handles := make([]string, len(got))
	for i, m := range got {
		handles[i] = m.Handle
	}
	var n int
	if err := w.pool.QueryRow(ctx, "SELECT skipq.ack($1::text[])", handles).Scan(&n); err != nil {
		return 0, err
	}
	return n, nil
}

// sqlConsumer runs the matrix through the SQL API, each point on a fresh
// queue with a pool like the raw baseline's, next to the raw baseline with
// its acks apart from its claims, as skipq.receive and skipq.ack are: the
// lifecycle scenario's figure for the point when it ran in this run in
// that shape, else measured here.
func (e *env) sqlConsumer(ctx context.Context, lifecycle []LifecyclePoint) ([]SQLConsumerPoint, error) {
	rawOf := map[Point]LifecyclePoint{}
	if e.o.ConsumerShape == AckSeparately {
		for _, lp := range lifecycle {
			rawOf[Point{lp.Batch, lp.Pairs}] = lp
		}
	}
	ns, err := e.startNodes(ctx)
	if err != nil {
		return nil, err
	}
	defer ns.stop()
	var out []SQLConsumerPoint
	for _, p := range e.o.Matrix {
		sp := SQLConsumerPoint{Batch: p.Batch, Pairs: p.Pairs}
		conns := int32(min(p.Pairs, node.DefaultConfig().DBMaxConns))
		pool, err := newPool(ctx, e.dbURL, sqlConsumerApp, conns)
		if err != nil {
			return out, err
		}
		w := &sqlConsumerWorkload{pool: pool, queue: queueName(fmt.Sprintf("sql-b%d-p%d", p.Batch, p.Pairs)),
			batch: p.Batch, avail: make(chan struct{}, 4*p.Pairs)}
		for i := range p.Pairs {
			w.senders = append(w.senders, newSender(e.http, ns.at(i), w.queue, p.Batch))
		}
		if err := warmPool(ctx, pool, int(conns)); err != nil {
			pool.Close()
			return out, err
		}
		e.checkpoint(ctx)
		e.logf("sqlconsumer batch %d × %d pairs: HTTP sends, SQL receives and acks", p.Batch, p.Pairs)
		sp.SQLMsgsPerS, sp.SQL, err = e.drive(ctx, w, p, nil)
		pool.Close()
		if err != nil {
			return out, fmt.Errorf("SQL batch %d × %d: %w", p.Batch, p.Pairs, err)
		}
		if err := e.deleteLeftovers(ctx, w.queue); err != nil {
			return out, err
		}
		if lp, ok := rawOf[p]; ok && lp.RawMsgsPerS > 0 {
			sp.RawMsgsPerS, sp.RawFromLifecycle = lp.RawMsgsPerS, true
		} else {
			e.logf("sqlconsumer batch %d × %d pairs in plain SQL", p.Batch, p.Pairs)
			if sp.RawMsgsPerS, sp.Raw, err = e.rawLifecycle(ctx, p, AckSeparately); err != nil {
				return out, fmt.Errorf("raw batch %d × %d: %w", p.Batch, p.Pairs, err)
			}
		}
		sp.SQLMsgsPerS, sp.RawMsgsPerS = round(sp.SQLMsgsPerS, 0), round(sp.RawMsgsPerS, 0)
		if sp.RawMsgsPerS > 0 {
			sp.Ratio = round(sp.SQLMsgsPerS/sp.RawMsgsPerS, 3)
		}
		e.logf("  SQL API %.0f msgs/s, raw %.0f msgs/s, ratio %.2f", sp.SQLMsgsPerS, sp.RawMsgsPerS, sp.Ratio)
		out = append(out, sp)
	}
	return out, nil
}

// SQLConsumerPoint is one batch × pairs point of the lifecycle with SQL
// consumers (HTTP sends, skipq.receive, skipq.ack) next to the raw baseline.
type SQLConsumerPoint struct {
	Batch       int       `json:"batch"`
	Pairs       int       `json:"pairs"`
	SQLMsgsPerS float64   `json:"sql_msgs_per_s"`
	RawMsgsPerS float64   `json:"raw_msgs_per_s"`
	Ratio       float64   `json:"ratio"`
	SQL         *RunStats `json:"sql_stats,omitempty"`
	Raw         *RunStats `json:"raw_stats,omitempty"`
	// RawFromLifecycle: the raw figure is the lifecycle scenario's for the
	// point, measured earlier in the same run.
	RawFromLifecycle bool `json:"raw_from_lifecycle"`
}

// writeSQLConsumer is the SQL consumer section of the text report.
func writeSQLConsumer(w io.Writer, ps []SQLConsumerPoint) {
	fmt.Fprintf(w, "SQL consumer (HTTP sends → skipq.receive → skipq.ack, each in autocommit), messages/s acked\n")
	fmt.Fprintf(w, "  %5s %5s  %10s %10s %8s   %s\n", "batch", "pairs", "SQL API", "raw SQL", "SQL/raw", "statement time (SQL API run)")
	for _, p := range ps {
		stmts := ""
		if p.SQL != nil {
			for i, st := range p.SQL.Statements {
				if i == 3 {
					break
				}
				stmts += fmt.Sprintf(" %s %.0f%% (%.3f ms)", st.Name, st.Percent, st.MeanMS)
			}
		}
		raw := thousands(p.RawMsgsPerS)
		if p.RawFromLifecycle {
			raw += "*"
		}
		fmt.Fprintf(w, "  %5d %5d  %10s %10s %8.2f  %s\n", p.Batch, p.Pairs, thousands(p.SQLMsgsPerS), raw, p.Ratio, stmts)
	}
	fmt.Fprintf(w, "  (* the lifecycle scenario's raw figure for the point, earlier in this run)\n\n")
}
