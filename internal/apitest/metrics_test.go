package apitest

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skipq/skipq/internal/node"
)

// metric reads one sample from a node's /metrics: the line starting with
// name{labels} (labels as Prometheus prints them, sorted), or -1 if absent.
func metric(t *testing.T, n *testNode, series string) float64 {
	t.Helper()
	resp, err := http.Get(n.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return -1
}

func TestMessageMetrics(t *testing.T) {
	n := newNode(t)
	n.must(t, http.StatusCreated, "PUT", "/v1/queues/m", map[string]any{"maxReceiveCount": 1, "deadLetterQueue": "m.dlq"})
	for range 3 {
		n.send(t, "m", map[string]any{"body": "x"})
	}
	n.send(t, "m", map[string]any{"body": "d", "messageId": "k"})
	n.must(t, http.StatusOK, "POST", "/v1/queues/m/messages", map[string]any{"body": "d", "messageId": "k"}) // duplicate
	msgs := n.receive(t, "m", map[string]any{"maxMessages": 3})
	n.must(t, http.StatusOK, "POST", "/v1/receipts/ack", map[string]any{"receiptHandle": msgs[0]["receiptHandle"]})
	n.must(t, http.StatusOK, "POST", "/v1/receipts/nack", map[string]any{"receiptHandle": msgs[1]["receiptHandle"]}) // dead-lettered
	n.send(t, "gone", map[string]any{"body": "x", "maxReceiveCount": 1})
	g := n.receive(t, "gone", nil)[0]
	n.must(t, http.StatusOK, "POST", "/v1/receipts/nack", map[string]any{"receiptHandle": g["receiptHandle"]}) // discarded

	for series, want := range map[string]float64{
		`skipq_messages_sent_total{queue="m",tenant="default"}`:                                    4,
		`skipq_messages_received_total{queue="m",tenant="default"}`:                                3,
		`skipq_messages_acked_total{queue="m",tenant="default"}`:                                   1,
		`skipq_messages_dead_lettered_total{queue="m",tenant="default"}`:                           1,
		`skipq_messages_discarded_total{queue="gone",reason="max_receive_count",tenant="default"}`: 1,
	} {
		if got := metric(t, n, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if got := metric(t, n, `skipq_http_request_duration_seconds_count{method="POST",route="/v1/receipts/ack",status="200"}`); got != 1 {
		t.Errorf("request histogram count = %v, want 1", got)
	}
	if got := metric(t, n, `skipq_db_pool_max_connections`); got <= 0 {
		t.Errorf("pool metrics missing: %v", got)
	}
	// The worker refreshes the gauges every few seconds (the count itself at
	// most every 15 s).
	eventually(t, 40*time.Second, "the queue gauges", func() bool {
		return metric(t, n, `skipq_queue_messages{queue="m",state="available",tenant="default"}`) == 1 &&
			metric(t, n, `skipq_queue_messages{queue="m",state="in_flight",tenant="default"}`) == 1 &&
			metric(t, n, `skipq_queue_messages{queue="m.dlq",state="available",tenant="default"}`) == 1
	})
}

func TestExpiredMetric(t *testing.T) {
	n := newNode(t)
	n.send(t, "e", map[string]any{"body": "x", "expirationSeconds": 1})
	eventually(t, 10*time.Second, "the expiry to be counted", func() bool {
		return metric(t, n, `skipq_messages_expired_total{queue="e",tenant="default"}`) == 1
	})
}

// /metrics names every tenant's queues and their depths: open by default
// (scrapers on a private network), behind a bearer token when one is set.
func TestMetricsToken(t *testing.T) {
	t.Run("no token configured", func(t *testing.T) {
		n := newNode(t)
		if r := n.do(t, "GET", "/metrics", nil); r.Status != http.StatusOK {
			t.Fatalf("status %d, want 200: %s", r.Status, r.Raw)
		}
	})
	t.Run("token configured", func(t *testing.T) {
		const token = "scrape-secret"
		// Auth is off: the token guards /metrics whatever SKIPQ_AUTH says.
		n := newNode(t, func(c *node.Config) { c.MetricsToken = token })
		n.send(t, "private", map[string]any{"body": "x"})
		for name, headers := range map[string][]string{
			"no header":           nil,
			"wrong token":         {"Authorization", "Bearer not-" + token},
			"token prefix":        {"Authorization", "Bearer " + token[:len(token)-1]},
			"token, wrong scheme": {"Authorization", "Basic " + token},
		} {
			r := n.do(t, "GET", "/metrics", nil, headers...)
			wantError(t, r, http.StatusUnauthorized, "unauthenticated")
			if strings.Contains(string(r.Raw), "private") {
				t.Fatalf("%s: the refusal shows a queue name: %s", name, r.Raw)
			}
		}
		for _, scheme := range []string{"Bearer", "bearer"} {
			r := n.do(t, "GET", "/metrics", nil, "Authorization", scheme+" "+token)
			if r.Status != http.StatusOK || !strings.Contains(string(r.Raw), `queue="private"`) {
				t.Fatalf("%s <token>: status %d, want 200 with the metrics: %.300s", scheme, r.Status, r.Raw)
			}
		}
	})
}
