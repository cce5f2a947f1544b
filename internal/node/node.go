package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipq/skipq/internal/auth"
	"github.com/skipq/skipq/internal/console"
	"github.com/skipq/skipq/internal/db"
	"github.com/skipq/skipq/internal/handlers"
	"github.com/skipq/skipq/internal/metrics"
	"github.com/skipq/skipq/internal/migrations"
	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/sqs/sqsstate"
	"github.com/skipq/skipq/internal/wake"
	"github.com/skipq/skipq/internal/worker"
)

// Run runs a node until ctx ends, then drains it. ready, if not nil, is
// called with the bound address once the node accepts requests.
func Run(ctx context.Context, cfg Config, log *slog.Logger, ready func(addr string)) error {
	log.Info("starting skipq", "config", cfg)
	if cfg.Migrate {
		// Migrations hold goose's session-level advisory lock while they
		// run, which a transaction pooler cannot keep: they go over the
		// direct (listener) URL, which is the database URL unless set.
		if err := migrations.Up(ctx, cfg.listenerURL()); err != nil {
			return err
		}
	}
	pool, err := db.NewPool(ctx, cfg.DatabaseURL, db.PoolOptions{
		MaxConns: int32(cfg.DBMaxConns), ConnectTimeout: 2 * time.Second, Log: log})
	if err != nil {
		return err
	}
	defer pool.Close()

	var svc *service.Service
	m := metrics.New(pool, func() wake.LongPollStats { return svc.Hub().Stats() })
	svc = service.New(pool, service.Options{Limits: cfg.Limits, Log: log, Observer: m, AsyncAcks: cfg.AckDurability == "async"})
	keys := auth.New(pool, 0)
	sqsState := sqsstate.New(pool, svc, log)
	hub := svc.Hub()
	bg, stopBackground := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stopBackground(); wg.Wait() }()

	if cfg.Role.ServesAPI() {
		// Before the node is ready: once it answers, SQL sends are held to
		// the same limits as its HTTP sends.
		publishSQLLimits(ctx, bg, svc, log, &wg)
		listener := &wake.Listener{URL: cfg.listenerURL(), Log: log,
			OnNotify: hub.HandleNotification, OnConnect: hub.ListenerConnected, OnDisconnect: hub.ListenerLost}
		wg.Go(func() { listener.Run(bg) })
	}
	// The hub runs on every node: it wakes this node's receives, and it
	// publishes the wake-ups of the messages this node's worker moves.
	wg.Go(func() { hub.Run(bg) })
	if cfg.Role.RunsWorker() {
		wg.Go(func() { worker.New(pool, svc, log, worker.Options{Vacuum: cfg.WorkerVacuum, SQS: sqsState}).Run(bg) })
	}
	latest, err := migrations.Latest()
	if err != nil {
		return err
	}
	var consoleEndpoint handlers.ConsoleEndpoint
	if cfg.Console && cfg.Role.ServesAPI() {
		secret, err := cfg.consoleSecret(log)
		if err != nil {
			return err
		}
		consoleEndpoint = console.New(svc, console.Config{AuthOff: cfg.Auth == "off", Secret: secret, Keys: keys, Log: log, Totals: m.TenantTotals})
	}
	// Listening before the handler is built: with auth off the public
	// origins are named by the port, which SKIPQ_LISTEN_ADDR may leave to
	// the system.
	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return err
	}
	requestBytes := service.NewBodyBudget(cfg.maxInflightBytes())
	limiters := handlers.NewLimiters(handlers.Config{RateLimit: cfg.RateLimit, RateBurst: cfg.rateBurst(),
		AuthFailureLimit: cfg.AuthFailureLimit, AuthFailureBurst: cfg.AuthFailureBurst})
	handler := handlers.New(svc, handlers.Config{
		AuthOff: cfg.Auth == "off", Keys: keys, MaxRequestBytes: cfg.MaxRequestBytes, RequestBytes: requestBytes, Log: log, Metrics: m,
		RateLimit: cfg.RateLimit, RateBurst: cfg.rateBurst(), MetricsToken: cfg.MetricsToken,
		AuthFailureLimit: cfg.AuthFailureLimit, AuthFailureBurst: cfg.AuthFailureBurst,
		TrustedProxies: cfg.trustedProxyPrefixes(), PublicOrigins: cfg.publicOrigins(ln.Addr().(*net.TCPAddr).Port),
		Ready: func(c *gin.Context) error { return checkReady(c, pool, latest) },
		// A worker-only node serves no API but answers probes and scrapes.
		ServiceRoutesOnly: !cfg.Role.ServesAPI(),
		Console:           consoleEndpoint,
		SQS:               cfg.sqsEndpoint(svc, sqsState, keys, requestBytes),
		Limiters:          limiters,
	})
	srv := &http.Server{
		Handler: handler,
		// Slow clients (slowloris) are cut off: headers within 10 s (or the
		// read timeout if shorter), the whole request within the read timeout.
		ReadHeaderTimeout: min(10*time.Second, time.Duration(cfg.ReadTimeout)*time.Second),
		ReadTimeout:       time.Duration(cfg.ReadTimeout) * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		// "OPTIONS *" goes to the router (a 404 envelope) instead of
		// net/http's bare 200 without X-Request-Id.
		DisableGeneralOptionsHandler: true,
	}
	kube := cfg.kubemqEndpoint(svc, keys, limiters, requestBytes, m, log)
	var kubeLn net.Listener
	if kube != nil {
		if kubeLn, err = net.Listen("tcp", cfg.KubeMQ.Addr); err != nil {
			_ = ln.Close()
			return err
		}
		log.Info("KubeMQ endpoint listening", "addr", kubeLn.Addr().String())
	}
	if cfg.PprofAddr != "" {
		pprofLn, err := net.Listen("tcp", cfg.PprofAddr)
		if err != nil {
			_ = ln.Close()
			if kubeLn != nil {
				_ = kubeLn.Close()
			}
			return fmt.Errorf("SKIPQ_PPROF_ADDR: %w", err)
		}
		pprofSrv := servePprof(pprofLn, log)
		defer func() { _ = pprofSrv.Close() }()
	}
	log.Info("listening", "addr", ln.Addr().String())
	// net/http's own refusals of unparseable requests become envelopes too.
	ln = handlers.EnvelopeListener(ln, log)
	if ready != nil {
		ready(ln.Addr().String())
	}
	serveErr := make(chan error, 2) // HTTP's and the KubeMQ endpoint's
	go func() { serveErr <- srv.Serve(ln) }()
	if kube != nil {
		go func() { serveErr <- kube.Serve(kubeLn) }()
	}

	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	// Drain: stop accepting, end waiting long-polls (they answer empty),
	// let in-flight requests finish, then stop the worker and the pool.
	log.Info("shutting down")
	hub.Close()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kubeDrained := make(chan struct{})
	go func() {
		// Its downstream calls answer CloseByServer and end; the rest drain
		// beside HTTP's, within the same 30 s.
		if kube != nil {
			kube.Shutdown(shutdownCtx)
		}
		close(kubeDrained)
	}()
	defer func() { <-kubeDrained }()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// servePprof serves Go's runtime profiles (net/http/pprof) on ln, a
// loopback address (Config.Validate), apart from the API: no route of the
// API's handler reaches them, and a node without SKIPQ_PPROF_ADDR has no
// listener for them at all (the package also registers them on
// http.DefaultServeMux, which nothing in skipq serves). The server ends
// when the caller closes it.
func servePprof(ln net.Listener, log *slog.Logger) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("runtime profiles served", "addr", ln.Addr().String(), "path", "/debug/pprof/")
	go func() { _ = srv.Serve(ln) }() // returns once Close closes ln
	return srv
}

// publishSQLLimits writes the node's SKIPQ_MAX_* into skipq.sql_limits, the
// only source of skipq.send's limits (internal/migrations/00006). Nodes that serve
// HTTP write them, so SQL refuses what HTTP refuses; worker-only nodes do
// not, so a worker started with other settings cannot change them.
//
// A node starts while PostgreSQL is away (db.NewPool), so an unavailable
// database is retried in the background until it answers. Any other failure
// (typically a role without INSERT and UPDATE on the table) is a
// configuration error: logged, and the node runs on, because its HTTP API is
// unaffected; skipq.send keeps the limits already in the table.
func publishSQLLimits(ctx, bg context.Context, svc *service.Service, log *slog.Logger, wg *sync.WaitGroup) {
	try := func(ctx context.Context) (retry bool) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		changed, err := svc.PublishSQLLimits(ctx)
		switch {
		case err == nil:
			l := svc.Limits()
			if changed {
				log.Info("SQL limits set to this node's", "maxMessageBytes", l.MaxMessageBytes,
					"maxDelaySeconds", l.MaxDelaySeconds, "maxExpirationSeconds", l.MaxExpirationSeconds,
					"maxReceiveCount", l.MaxReceiveCount)
			}
			return false
		case service.KindOf(err) == service.KindUnavailable:
			return true
		default:
			log.Error("cannot write the SQL limits: skipq.send keeps the ones already in skipq.sql_limits, "+
				"which may differ from this node's SKIPQ_MAX_*; grant this node's database role INSERT and UPDATE "+
				"on skipq.sql_limits, or run it as the schema owner", "err", err)
			return false
		}
	}
	if !try(ctx) {
		return
	}
	log.Warn("the database is unavailable: the SQL limits will be written when it answers")
	wg.Go(func() {
		for wait := time.Second; ; wait = min(2*wait, 30*time.Second) {
			select {
			case <-bg.Done():
				return
			case <-time.After(wait):
			}
			if !try(bg) {
				return
			}
		}
	})
}

// checkReady: the database answers within a second and its schema is the
// one this binary carries, or a newer one. Every migration keeps the
// previous release serving (docs/DESIGN.md, "Online migrations"), so during
// a rolling upgrade the nodes not yet replaced stay in the load balancer
// after the first new node migrated; an older schema (a node started with
// SKIPQ_MIGRATE=false ahead of the migration) is not ready.
func checkReady(ctx context.Context, pool *pgxpool.Pool, latest int64) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	v, err := db.SchemaVersion(ctx, pool)
	if err != nil {
		return errors.New("the database is unavailable")
	}
	if v < latest {
		return fmt.Errorf("the database schema is at version %d, this binary needs %d", v, latest)
	}
	return nil
}
