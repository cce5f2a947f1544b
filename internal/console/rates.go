package console

import (
	"net/http"
	"sync"
	"time"

	"github.com/skipq/skipq/internal/metrics"
)

// rateSampler turns this node's counters into per-second rates: it keeps a
// minute of samples per tenant, taken as the rates page polls, and compares
// the newest with the oldest.
type rateSampler struct {
	mu      sync.Mutex
	tenants map[string][]rateSample
}

type rateSample struct {
	at     time.Time
	totals metrics.Totals
}

const (
	rateWindow       = time.Minute
	rateMinSpacing   = 4 * time.Second
	rateTenantsLimit = 10000
)

type ratesData struct {
	Totals                metrics.Totals
	Sent, Received, Acked float64
	Over                  time.Duration
	Measuring, NoCounters bool
}

func (s *rateSampler) sample(tenant string, totals metrics.Totals, now time.Time) ratesData {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.tenants) >= rateTenantsLimit {
		clear(s.tenants)
	}
	kept := s.tenants[tenant]
	for len(kept) > 0 && now.Sub(kept[0].at) > rateWindow {
		kept = kept[1:]
	}
	if len(kept) == 0 || now.Sub(kept[len(kept)-1].at) >= rateMinSpacing {
		kept = append(kept, rateSample{now, totals})
	}
	s.tenants[tenant] = kept
	d := ratesData{Totals: totals}
	oldest := kept[0]
	d.Over = now.Sub(oldest.at).Round(time.Second)
	secs := now.Sub(oldest.at).Seconds()
	if secs < 1 {
		d.Measuring = true
		return d
	}
	d.Sent = (totals.Sent - oldest.totals.Sent) / secs
	d.Received = (totals.Received - oldest.totals.Received) / secs
	d.Acked = (totals.Acked - oldest.totals.Acked) / secs
	return d
}

func (c *Console) rateNow(id identity) ratesData {
	if c.cfg.Totals == nil {
		return ratesData{NoCounters: true}
	}
	return c.rates.sample(id.Tenant, c.cfg.Totals(id.Tenant), time.Now())
}

type ratesPageData struct {
	Rates ratesData
	Chart chart
}

func (c *Console) ratesPage(w http.ResponseWriter, r *http.Request, id identity) {
	points, err := c.svc.DepthHistory(r.Context(), id.Tenant, "", chartSpan)
	if err != nil {
		c.serviceError(w, r, id, err)
		return
	}
	d := ratesPageData{Rates: c.rateNow(id), Chart: newChart(points)}
	c.renderView(w, r, http.StatusOK, "rates", "layout", view{Title: "Rates", Nav: "rates", ID: id, Data: d})
}

// rateValues is the rates table alone, which the rates page polls.
func (c *Console) rateValues(w http.ResponseWriter, r *http.Request, id identity) {
	c.renderView(w, r, http.StatusOK, "rates", "values", view{ID: id, Data: ratesPageData{Rates: c.rateNow(id)}})
}
