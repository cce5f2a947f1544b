package handlers

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/skipq/skipq/service"
)

// metricsHandler serves a node's own registry (not the global one: tests
// run several nodes in one process).
func metricsHandler(svc *service.Service) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "skipq_longpoll_waiters",
			Help: "Receives parked on this node waiting for messages.",
		}, func() float64 { return float64(svc.Hub().Waiters()) }),
	)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
