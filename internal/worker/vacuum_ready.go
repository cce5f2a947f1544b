package worker

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/service"
)

// VacuumReady vacuums the ready table alone, on every node, as soon as
// claims left ReadyVacuumDeadTuples dead rows in it. Each dead row's index
// entry sits at the head of its queue's walk, where every claim steps over
// it until VACUUM removes it (see ReadyVacuum): left to VacuumMessages'
// turn (every 3 s, on the messages table's dead rows) they grew to
// thousands of buffers a claim. The ready table holds two bigints per
// ready message and no body, so a vacuum of it is short next to one of
// the messages table.
type VacuumReady struct {
	Config
	deps
}

// ReadyVacuumDeadTuples is how many dead ready rows make a vacuum worth it
// (when the table holds at most vacuumLiveShare times as many live ones).
const ReadyVacuumDeadTuples = 1000

// NewVacuumReady builds the job: every second.
func NewVacuumReady(pool *pgxpool.Pool, svc *service.Service) *VacuumReady {
	return &VacuumReady{Config: Config{Period: time.Second, Timeout: time.Minute}, deps: newDeps(pool, svc)}
}

// RunOnce vacuums the ready table if enough dead rows piled up (worthVacuum). Nodes do
// not take turns: VACUUM (SKIP_LOCKED) passes over a table another vacuum
// is working on.
func (j *VacuumReady) RunOnce(ctx context.Context) error {
	rows, err := j.q.ReadyDeadTuples(ctx)
	if err != nil || !worthVacuum(rows.Dead, rows.Live, ReadyVacuumDeadTuples) {
		return failed("vacuum ready", err)
	}
	return failed("vacuum ready", j.q.ReadyVacuum(ctx))
}
