package db

import (
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Commit is how a statement's transaction commits: whether its answer waits
// for the commit's WAL flush (docs/RELIABILITY.md, "Durability by need").
type Commit int

const (
	// CommitDurable waits for the flush, as the server's
	// synchronous_commit says (on, by default): what was answered survives
	// a crash of the server.
	CommitDurable Commit = iota
	// CommitAsync does not wait: a crash of the server in the next moments
	// (at most 3 × wal_writer_delay, 600 ms by default) may undo the
	// transaction, never half of it.
	CommitAsync
	// CommitAsyncUnlessMoved is CommitAsync for a transaction that only
	// changed messages in place, and CommitDurable for one that also
	// inserted or deleted messages (a nack's dead-letter move or discard).
	CommitAsyncUnlessMoved
)

// asyncCommit is the set_config call that lets the transaction it runs in
// commit without waiting for the WAL flush. Transaction-scoped (true): no
// session keeps it, so it holds behind a transaction pooler too.
const asyncCommit = "set_config('synchronous_commit', 'off', true)"

// messagesMoved is how many rows of skipq.messages this backend inserted
// and deleted, as far as its statistics know: this transaction's changes
// so far, plus those of earlier transactions not yet flushed to the shared
// statistics (PostgreSQL keeps them pending for up to a second). Read in
// the backend's memory: no table is read.
const messagesMoved = `(pg_stat_get_xact_tuples_inserted('skipq.messages'::regclass)
     + pg_stat_get_xact_tuples_deleted('skipq.messages'::regclass))`

// movedBefore notes messagesMoved before the statement, in a setting of
// the transaction, for durableIfMoved.
const movedBefore = "set_config('skipq.moved_before', " + messagesMoved + "::text, true)"

// durableIfMoved makes the transaction it runs in wait for its commit's
// flush after all when it inserted or deleted rows of skipq.messages since
// movedBefore (nothing is flushed within a transaction, so the difference
// is its own).
const durableIfMoved = `SELECT set_config('synchronous_commit', 'on', true)
WHERE ` + messagesMoved + ` > current_setting('skipq.moved_before')::bigint`

// Committing runs each statement as it is (as Direct does) and commits it
// as c says; a durable statement is sent without anything piped around it.
func Committing(pool *pgxpool.Pool, c Commit) DBTX {
	if c == CommitDurable {
		return direct{pool: pool}
	}
	return committing(piped{pool: pool, setup: "SELECT " + asyncCommit}, c)
}

// LockBoundedCommitting is LockBounded that commits as c says.
func LockBoundedCommitting(pool *pgxpool.Pool, c Commit) DBTX {
	if c == CommitDurable {
		return LockBounded(pool)
	}
	return committing(piped{pool: pool, setup: lockBounded + ", " + asyncCommit}, c)
}

func committing(p piped, c Commit) piped {
	if c == CommitAsyncUnlessMoved {
		p.setup += ", " + movedBefore
		p.trailer = durableIfMoved
	}
	return p
}

// AckThenClaimSetup is the setup statement of AckThenClaim: the shared
// lock timeout when lockBounded (as LockBounded's), and a commit as c says
// (CommitAsyncUnlessMoved is CommitAsync here: an ack and a claim move
// nothing); "" for neither.
func AckThenClaimSetup(lockBounded bool, c Commit) string {
	var calls []string
	if lockBounded {
		calls = append(calls, lockBoundedCall)
	}
	if c != CommitDurable {
		calls = append(calls, asyncCommit)
	}
	if len(calls) == 0 {
		return ""
	}
	return "SELECT " + strings.Join(calls, ", ")
}
