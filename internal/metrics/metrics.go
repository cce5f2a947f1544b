// Package metrics holds a node's Prometheus metrics. It implements
// service.Observer, so the service reports what happened to messages without
// knowing about Prometheus, and serves /metrics from the node's own registry
// (several nodes can live in one process, as in the tests).
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/skipq/skipq/internal/service"
	"github.com/skipq/skipq/internal/wake"
)

// MaxQueueLabels bounds the distinct (tenant, queue) label pairs a node
// exports; further queues are counted under tenant="_other", queue="_other".
const MaxQueueLabels = 1000

// Metrics is one node's set of collectors.
type Metrics struct {
	reg *prometheus.Registry

	sent, received, acked, nacked, deadLettered, expired *prometheus.CounterVec
	discarded                                            *prometheus.CounterVec
	topicPublished, topicDelivered, topicUnrouted        *prometheus.CounterVec
	queueMessages, oldestAge                             *prometheus.GaugeVec
	requestDuration, kubemqCallDuration                  *prometheus.HistogramVec

	mu     sync.Mutex
	labels map[[2]string]bool
}

// New builds the metrics of a node. longPolls reports the hub's waiting
// receives (nil: none); pool, when not nil, is exported as skipq_db_pool_*.
func New(pool *pgxpool.Pool, longPolls func() wake.LongPollStats) *Metrics {
	if longPolls == nil {
		longPolls = func() wake.LongPollStats { return wake.LongPollStats{} }
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append([]string{"tenant", "queue"}, labels...))
	}
	m := &Metrics{
		reg:          prometheus.NewRegistry(),
		sent:         counter("skipq_messages_sent_total", "Messages sent (duplicates excluded)."),
		received:     counter("skipq_messages_received_total", "Deliveries (claims and autoAck receives; peeks excluded)."),
		acked:        counter("skipq_messages_acked_total", "Messages acknowledged (autoAck included)."),
		nacked:       counter("skipq_messages_nacked_total", "Messages made available again by a nack."),
		deadLettered: counter("skipq_messages_dead_lettered_total", "Messages moved to a dead-letter queue, by source queue."),
		discarded:    counter("skipq_messages_discarded_total", "Messages dropped, by source queue and reason.", "reason"),
		expired:      counter("skipq_messages_expired_total", "Expired messages removed by the worker."),
		topicPublished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skipq_topic_published_total",
			Help: "Messages published to a topic (duplicates excluded)."}, []string{"tenant", "topic"}),
		topicDelivered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skipq_topic_delivered_total",
			Help: "Copies of published messages delivered to a topic's groups."}, []string{"tenant", "topic"}),
		topicUnrouted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skipq_topic_unrouted_total",
			Help: "Published messages that no subscription's filter matched."}, []string{"tenant", "topic"}),
		queueMessages: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "skipq_queue_messages", Help: "Messages in a queue by state, refreshed by the worker."},
			[]string{"tenant", "queue", "state"}),
		oldestAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "skipq_queue_oldest_available_age_seconds", Help: "Age of the oldest available message (0 when none), refreshed by the worker."},
			[]string{"tenant", "queue"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "skipq_http_request_duration_seconds", Help: "HTTP request duration by route template and status.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}},
			[]string{"method", "route", "status"}),
		kubemqCallDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "skipq_kubemq_call_duration_seconds", Help: "KubeMQ gRPC call duration by method and gRPC status code (a stream's whole life).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}},
			[]string{"method", "code"}),
		labels: map[[2]string]bool{},
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.sent, m.received, m.acked, m.nacked, m.deadLettered, m.discarded, m.expired,
		m.topicPublished, m.topicDelivered, m.topicUnrouted,
		m.queueMessages, m.oldestAge, m.requestDuration, m.kubemqCallDuration,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "skipq_longpoll_waiters", Help: "Receives parked on this node waiting for messages.",
		}, func() float64 { return float64(longPolls().Parked) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "skipq_longpoll_waiters_max", Help: "Most receives that may wait on this node (SKIPQ_MAX_WAITERS; 0: no cap).",
		}, func() float64 { return float64(longPolls().MaxParked) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "skipq_longpoll_refused_total", Help: "Receives refused (429) because this node already held its most waiting receives.",
		}, func() float64 { return float64(longPolls().Refused) }),
	)
	if pool != nil {
		m.reg.MustRegister(poolCollector{pool})
	}
	return m
}

// Handler serves the registry.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// label returns the label values for a queue, folding queues beyond
// MaxQueueLabels into "_other".
func (m *Metrics) label(tenant, queue string) (string, string) {
	k := [2]string{tenant, queue}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.labels[k] {
		return tenant, queue
	}
	if len(m.labels) >= MaxQueueLabels {
		return "_other", "_other"
	}
	m.labels[k] = true
	return tenant, queue
}

func (m *Metrics) add(c *prometheus.CounterVec, tenant, queue string, n int, extra ...string) {
	if n <= 0 {
		return
	}
	t, q := m.label(tenant, queue)
	c.WithLabelValues(append([]string{t, q}, extra...)...).Add(float64(n))
}

var _ service.Observer = (*Metrics)(nil)

func (m *Metrics) MessagesSent(tenant, queue string, n int)     { m.add(m.sent, tenant, queue, n) }
func (m *Metrics) MessagesReceived(tenant, queue string, n int) { m.add(m.received, tenant, queue, n) }
func (m *Metrics) MessagesAcked(tenant, queue string, n int)    { m.add(m.acked, tenant, queue, n) }
func (m *Metrics) MessagesNacked(tenant, queue string, n int)   { m.add(m.nacked, tenant, queue, n) }
func (m *Metrics) MessagesDeadLettered(tenant, queue string, n int) {
	m.add(m.deadLettered, tenant, queue, n)
}
func (m *Metrics) MessagesDiscarded(tenant, queue, reason string, n int) {
	m.add(m.discarded, tenant, queue, n, reason)
}
func (m *Metrics) MessagesExpired(tenant, queue string, n int) { m.add(m.expired, tenant, queue, n) }

// TopicPublished counts under the queues' label rules: a topic's name
// takes the place of a queue's in the (tenant, name) pairs a node exports.
func (m *Metrics) TopicPublished(tenant, topic string, published, delivered, unrouted int) {
	m.add(m.topicPublished, tenant, topic, published)
	m.add(m.topicDelivered, tenant, topic, delivered)
	m.add(m.topicUnrouted, tenant, topic, unrouted)
}

// QueueCounts replaces the per-queue gauges with a fresh reading.
func (m *Metrics) QueueCounts(counts []service.QueueCount, now time.Time) {
	m.queueMessages.Reset()
	m.oldestAge.Reset()
	for _, g := range counts {
		t, q := m.label(g.Tenant, g.Queue)
		m.queueMessages.WithLabelValues(t, q, "available").Add(float64(g.Available))
		m.queueMessages.WithLabelValues(t, q, "delayed").Add(float64(g.Delayed))
		m.queueMessages.WithLabelValues(t, q, "in_flight").Add(float64(g.InFlight))
		age := 0.0
		if g.OldestAvailableAt != nil {
			age = max(0, now.Sub(*g.OldestAvailableAt).Seconds())
		}
		gauge := m.oldestAge.WithLabelValues(t, q)
		if t == "_other" { // folded queues: the oldest of them
			age = max(age, readGauge(gauge))
		}
		gauge.Set(age)
	}
}

// ObserveRequest records one HTTP request.
func (m *Metrics) ObserveRequest(method, route string, status int, d time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	m.requestDuration.WithLabelValues(method, route, strconv.Itoa(status)).Observe(d.Seconds())
}

// ObserveKubeMQCall records one finished KubeMQ gRPC call (method: its
// full name, /kubemq.kubemq/<Rpc>).
func (m *Metrics) ObserveKubeMQCall(method, code string, d time.Duration) {
	m.kubemqCallDuration.WithLabelValues(method, code).Observe(d.Seconds())
}

// Totals are a tenant's message counters on this node since it started.
type Totals struct{ Sent, Received, Acked float64 }

// TenantTotals sums this node's counters over a tenant's queues (the
// console's rates). Queues folded into "_other" are not counted.
func (m *Metrics) TenantTotals(tenant string) Totals {
	sum := func(c *prometheus.CounterVec) float64 {
		ch := make(chan prometheus.Metric, 64)
		go func() { c.Collect(ch); close(ch) }()
		total := 0.0
		for metric := range ch {
			var d dto.Metric
			if metric.Write(&d) != nil {
				continue
			}
			for _, l := range d.GetLabel() {
				if l.GetName() == "tenant" && l.GetValue() == tenant {
					total += d.GetCounter().GetValue()
				}
			}
		}
		return total
	}
	return Totals{Sent: sum(m.sent), Received: sum(m.received), Acked: sum(m.acked)}
}
