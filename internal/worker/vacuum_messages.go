package worker

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/service"
)

// VacuumMessages vacuums the messages table when it is this node's turn
// and enough dead row versions piled up. Autovacuum naps for a minute
// between rounds; a busy queue table collects hundreds of thousands of dead
// versions in that time, and claims step over their index entries until
// they are gone.
type VacuumMessages struct {
	Config
	deps
}

// VacuumPeriod is how often, cluster-wide, the worker considers vacuuming
// the messages table, and VacuumDeadTuples how many dead row versions make
// it worth it (when the table holds at most vacuumLiveShare times as many
// live ones; see worthVacuum).
const (
	VacuumPeriod     = 3 * time.Second
	VacuumDeadTuples = 5000
)

// vacuumLiveShare bounds a vacuum's cost per dead row it removes: a VACUUM
// reads every index of its table whole, so a table is vacuumed only once it
// holds at least one dead row per vacuumLiveShare live ones. A run costs
// more the larger the backlog, but comes that much less often; each message
// claimed or acked pays a bounded share of it (measured on this machine
// type, loaded: the ready table of 1,000,000 ready messages took 160-190 ms
// to vacuum).
const vacuumLiveShare = 10

// worthVacuum says whether a table with these dead and live rows is worth a
// vacuum: at least floor dead rows, and at least one per vacuumLiveShare
// live ones.
func worthVacuum(dead, live, floor int64) bool {
	return dead >= floor && dead >= live/vacuumLiveShare
}

// NewVacuumMessages builds the job: every VacuumPeriod.
func NewVacuumMessages(pool *pgxpool.Pool, svc *service.Service) *VacuumMessages {
	return &VacuumMessages{Config: Config{Period: VacuumPeriod, Timeout: 2 * time.Minute}, deps: newDeps(pool, svc)}
}

// RunOnce vacuums if it is this node's turn and it is worth it.
func (j *VacuumMessages) RunOnce(ctx context.Context) error {
	turn, err := j.q.JobTakeTurn(ctx, db.JobTakeTurnParams{Now: j.now(), Job: "vacuum",
		PeriodSeconds: int32(VacuumPeriod / time.Second)})
	if err != nil || !turn {
		return failed("vacuum", err)
	}
	rows, err := j.q.MessageDeadTuples(ctx)
	if err != nil || !worthVacuum(rows.Dead, rows.Live, VacuumDeadTuples) {
		return failed("vacuum", err)
	}
	return failed("vacuum", j.q.MessageVacuum(ctx))
}
