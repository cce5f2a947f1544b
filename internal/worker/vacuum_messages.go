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
// it worth it.
const (
	VacuumPeriod     = 3 * time.Second
	VacuumDeadTuples = 5000
)

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
	dead, err := j.q.MessageDeadTuples(ctx)
	if err != nil || dead < VacuumDeadTuples {
		return failed("vacuum", err)
	}
	return failed("vacuum", j.q.MessageVacuum(ctx))
}
