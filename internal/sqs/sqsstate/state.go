// Package sqsstate is what the SQS endpoint keeps beside the queues and
// nothing else reads: message move tasks (StartMessageMoveTask), which
// run in the background on the node that started them and are taken over
// by another node's worker when it stops, and the attempts of FIFO
// receives (ReceiveRequestAttemptId). What SQS asks of the queues
// themselves (sends that never create a queue, receives, settles, queue
// attributes) are methods of service.Service.
package sqsstate

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/service"
)

// State is one node's SQS state: its statements, and the queue service
// its move tasks redrive through.
type State struct {
	svc *service.Service
	q   *db.Queries // each statement run as package db decides (db.Open)
	log *slog.Logger
}

// New builds a node's SQS state on its pool and queue service.
func New(pool *pgxpool.Pool, svc *service.Service, log *slog.Logger) *State {
	if log == nil {
		log = slog.Default()
	}
	return &State{svc: svc, q: db.Open(pool), log: log}
}
