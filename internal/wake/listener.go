package wake

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// Channel is the one NOTIFY channel skipq uses; skipq.wake writes its
// payloads (see Notice).
const Channel = "skipq_wake"

// Listener keeps ONE dedicated connection per node LISTENing on Channel
// and hands each payload to OnNotify. The connection is re-established with
// backoff when it drops; OnConnect runs after every (re)connect so callers can
// re-check whatever they may have missed while it was down.
type Listener struct {
	URL       string
	OnNotify  func(payload string)
	OnConnect func()
	// OnDisconnect runs when the connection is lost (or could not be made).
	OnDisconnect func(err error)
	Log          *slog.Logger
}

// Run listens until ctx is done.
func (l *Listener) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := l.listenOnce(ctx, func() { backoff = 100 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		if l.OnDisconnect != nil {
			l.OnDisconnect(err)
		}
		l.Log.Warn("listener disconnected; reconnecting", "error", err, "backoff", backoff.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (l *Listener) listenOnce(ctx context.Context, connected func()) error {
	connectCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, err := pgx.Connect(connectCtx, l.URL)
	cancel()
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	connected()
	if l.OnConnect != nil {
		l.OnConnect()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		l.OnNotify(n.Payload)
	}
}
