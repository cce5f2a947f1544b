package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/skipq/skipq/internal/kubemq/kubemqpb"
)

// KubeMQMatrix is the kubemq scenario's points: single messages by 16
// pairs, batches of 100 by 4.
var KubeMQMatrix = []Point{{1, 16}, {100, 4}}

// KubeMQPoint is one point of the kubemq scenario: the lifecycle over
// QueuesUpstream and QueuesDownstream next to the native HTTP API's. Each
// side's window has its own evidence: in its cpu_us_per_message,
// node_processes is the node's CPU per message and bench_process that
// side's load generators' (the node runs in a process of its own).
type KubeMQPoint struct {
	Batch          int       `json:"batch"`
	Pairs          int       `json:"pairs"`
	KubeMQMsgsPerS float64   `json:"kubemq_msgs_per_s"`
	HTTPMsgsPerS   float64   `json:"http_msgs_per_s"`
	Ratio          float64   `json:"ratio"` // KubeMQ / native HTTP
	KubeMQ         *RunStats `json:"kubemq_run,omitempty"`
	HTTP           *RunStats `json:"http_run,omitempty"`
}

// KubeMQResult is the kubemq scenario.
type KubeMQResult struct {
	B1x16Ratio  float64        `json:"b1x16_ratio"`
	B100x4Ratio float64        `json:"b100x4_ratio"`
	WakeP50Ms   float64        `json:"wake_p50_ms"`
	Points      []KubeMQPoint  `json:"points"`
	Wake        *LatencyResult `json:"wake_ms,omitempty"`
}

// kubemqWorkload is the lifecycle as KubeMQ's Go SDK v2 runs it: each
// producer sends on its own QueuesUpstream call and waits for the answer;
// each consumer Gets on its own QueuesDownstream call and settles with
// AckAll (answered only on failure; the call serves it before its next Get).
type kubemqWorkload struct {
	up    []kubemqpb.Kubemq_QueuesUpstreamClient
	down  []kubemqpb.Kubemq_QueuesDownstreamClient
	queue string
	batch int
	msgs  []*kubemqpb.QueueMessage
}

func newKubeMQWorkload(ctx context.Context, clients []kubemqpb.KubemqClient, queue string, p Point) (*kubemqWorkload, error) {
	w := &kubemqWorkload{queue: queue, batch: p.Batch}
	for i := range p.Pairs {
		c := clients[i%len(clients)]
		up, err := c.QueuesUpstream(ctx)
		if err != nil {
			return nil, err
		}
		down, err := c.QueuesDownstream(ctx)
		if err != nil {
			return nil, err
		}
		w.up, w.down = append(w.up, up), append(w.down, down)
	}
	body := sendBody(1)
	for range p.Batch {
		w.msgs = append(w.msgs, &kubemqpb.QueueMessage{ClientID: "bench", Channel: queue, Body: body})
	}
	return w, nil
}

func (w *kubemqWorkload) produce(_ context.Context, i int) (int, error) {
	if err := w.up[i].Send(&kubemqpb.QueuesUpstreamRequest{RequestID: strconv.Itoa(i), Messages: w.msgs}); err != nil {
		return 0, err
	}
	r, err := w.up[i].Recv()
	if err != nil {
		return 0, err
	}
	if r.GetIsError() {
		return 0, errors.New(r.GetError())
	}
	for _, res := range r.GetResults() {
		if res.GetIsError() {
			return 0, errors.New(res.GetError())
		}
	}
	return w.batch, nil
}

func (w *kubemqWorkload) consume(_ context.Context, i int) (int, error) {
	d := w.down[i]
	if err := d.Send(&kubemqpb.QueuesDownstreamRequest{RequestID: strconv.Itoa(i), ClientID: "bench",
		RequestTypeData: kubemqpb.QueuesDownstreamRequestType_Get, Channel: w.queue, MaxItems: int32(w.batch),
		WaitTimeout: 1000}); err != nil {
		return 0, err
	}
	r, err := d.Recv()
	if err != nil {
		return 0, err
	}
	if r.GetIsError() {
		return 0, errors.New(r.GetError())
	}
	if len(r.GetMessages()) == 0 {
		return 0, nil
	}
	err = d.Send(&kubemqpb.QueuesDownstreamRequest{ClientID: "bench", RequestTypeData: kubemqpb.QueuesDownstreamRequestType_AckAll,
		RefTransactionId: r.GetTransactionId()})
	return len(r.GetMessages()), err
}

// kubemqNodes starts nodes that also serve the KubeMQ endpoint, each in a
// process of its own as the sqs scenario's (harness_nodeproc.go): the gRPC
// clients' CPU and garbage stay in the bench's process, and each window
// reports the node's CPU apart from the load generators'. It returns a
// client of each.
func (e *env) kubemqNodes(ctx context.Context) (*nodes, []kubemqpb.KubemqClient, func(), error) {
	if len(e.o.URLs) > 0 {
		return nil, nil, nil, errors.New("the kubemq scenario runs nodes it starts only (their gRPC addresses are its own)")
	}
	var addrs []string
	ns, err := e.startNodeProcesses(ctx, func(s *nodeProcessSettings) {
		s.KubeMQAddr = freeLoopbackAddr()
		addrs = append(addrs, s.KubeMQAddr)
	})
	if err != nil {
		return nil, nil, nil, err
	}
	var clients []kubemqpb.KubemqClient
	var conns []*grpc.ClientConn
	closeAll := func() {
		for _, c := range conns {
			_ = c.Close()
		}
		ns.stop()
	}
	for _, a := range addrs {
		conn, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			closeAll()
			return nil, nil, nil, err
		}
		conns, clients = append(conns, conn), append(clients, kubemqpb.NewKubemqClient(conn))
	}
	return ns, clients, closeAll, nil
}

// freeLoopbackAddr is a loopback address whose port nobody listens on now.
func freeLoopbackAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// kubemqScenario runs each point over KubeMQ's streams and over the native
// HTTP API (a fresh queue each), then measures the wake latency of a Get
// waiting on an empty queue.
func (e *env) kubemqScenario(ctx context.Context) (*KubeMQResult, error) {
	ns, clients, stop, err := e.kubemqNodes(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	res := &KubeMQResult{}
	for _, p := range e.o.KubeMQMatrix {
		kp := KubeMQPoint{Batch: p.Batch, Pairs: p.Pairs}
		q := queueName(fmt.Sprintf("kubemq-b%d-p%d", p.Batch, p.Pairs))
		if err := e.http.createQueue(ctx, ns.at(0), q, ""); err != nil {
			return nil, err
		}
		wctx, endStreams := context.WithCancel(ctx)
		w, err := newKubeMQWorkload(wctx, clients, q, p)
		if err != nil {
			endStreams()
			return nil, err
		}
		e.checkpoint(ctx)
		e.logf("kubemq batch %d × %d pairs over QueuesUpstream/QueuesDownstream", p.Batch, p.Pairs)
		kp.KubeMQMsgsPerS, kp.KubeMQ, err = e.drive(ctx, w, p, nil)
		endStreams()
		if err != nil {
			return nil, fmt.Errorf("KubeMQ batch %d × %d: %w", p.Batch, p.Pairs, err)
		}
		if err := e.deleteLeftovers(ctx, q); err != nil {
			return nil, err
		}
		if kp.HTTPMsgsPerS, kp.HTTP, err = e.nativeBeside(ctx, ns, "kubemq", p, nil); err != nil {
			return nil, err
		}
		kp.KubeMQMsgsPerS, kp.HTTPMsgsPerS = round(kp.KubeMQMsgsPerS, 0), round(kp.HTTPMsgsPerS, 0)
		if kp.HTTPMsgsPerS > 0 {
			kp.Ratio = round(kp.KubeMQMsgsPerS/kp.HTTPMsgsPerS, 3)
		}
		e.logf("  KubeMQ %.0f msgs/s, native HTTP %.0f msgs/s, ratio %.2f", kp.KubeMQMsgsPerS, kp.HTTPMsgsPerS, kp.Ratio)
		if kp.KubeMQ != nil && kp.HTTP != nil {
			e.logf("  CPU µs a message, node / load generators: KubeMQ %.0f / %.0f, native %.0f / %.0f",
				kp.KubeMQ.CPUPerMessage.Nodes, kp.KubeMQ.CPUPerMessage.Bench, kp.HTTP.CPUPerMessage.Nodes, kp.HTTP.CPUPerMessage.Bench)
		}
		switch p {
		case Point{1, 16}:
			res.B1x16Ratio = kp.Ratio
		case Point{100, 4}:
			res.B100x4Ratio = kp.Ratio
		}
		res.Points = append(res.Points, kp)
	}
	if res.Wake, err = e.kubemqWake(ctx, ns, clients); err != nil {
		return res, err
	}
	res.WakeP50Ms = res.Wake.P50
	return res, nil
}

// kubemqWake is the latency scenario over KubeMQ: receivers waiting in a
// QueuesDownstream Get (AutoAck), one SendQueueMessage at a time; each
// sample is the time from the send's answer to the waiting Get's answer.
func (e *env) kubemqWake(ctx context.Context, ns *nodes, clients []kubemqpb.KubemqClient) (*LatencyResult, error) {
	q := queueName("kubemq-wake")
	if err := e.http.createQueue(ctx, ns.at(0), q, ""); err != nil {
		return nil, err
	}
	e.logf("kubemq wake latency: %d samples", e.o.LatencySamples)
	rctx, stop := context.WithCancel(ctx)
	arrivals := make(chan arrival, latencyReceivers)
	errc := make(chan error, latencyReceivers)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	for i := range latencyReceivers {
		d, err := clients[i%len(clients)].QueuesDownstream(rctx)
		if err != nil {
			return nil, err
		}
		wg.Go(func() {
			for rctx.Err() == nil {
				err := d.Send(&kubemqpb.QueuesDownstreamRequest{ClientID: "bench", RequestTypeData: kubemqpb.QueuesDownstreamRequestType_Get,
					Channel: q, MaxItems: 1, WaitTimeout: 20000, AutoAck: true})
				var r *kubemqpb.QueuesDownstreamResponse
				if err == nil {
					r, err = d.Recv()
				}
				at := time.Now()
				if err != nil {
					if rctx.Err() == nil {
						errc <- err
					}
					return
				}
				for _, m := range r.GetMessages() {
					arrivals <- arrival{at, string(m.GetBody())}
				}
			}
		})
	}
	if err := e.waitForWaiters(ctx, ns.urls, latencyReceivers, 30*time.Second); err != nil {
		return nil, err
	}
	return e.sampleWakes(ctx, func(ctx context.Context, body string) error {
		r, err := clients[0].SendQueueMessage(ctx, &kubemqpb.QueueMessage{ClientID: "bench", Channel: q, Body: []byte(body)})
		if err == nil && r.GetIsError() {
			err = errors.New(r.GetError())
		}
		return err
	}, arrivals, errc, "wake-", "waiting Get")
}

// writeKubeMQ is the kubemq section of the text report.
func writeKubeMQ(w io.Writer, k *KubeMQResult) {
	fmt.Fprintf(w, "KubeMQ (QueuesUpstream + QueuesDownstream) next to the native HTTP API, lifecycle messages/s acked\n")
	fmt.Fprintf(w, "  %5s %5s  %10s %10s %8s   %s\n", "batch", "pairs", "KubeMQ", "native", "KubeMQ/nat", "CPU µs/msg node + load generators: KubeMQ, native")
	for _, p := range k.Points {
		cpu := ""
		if p.KubeMQ != nil && p.HTTP != nil {
			c, n := p.KubeMQ.CPUPerMessage, p.HTTP.CPUPerMessage
			cpu = fmt.Sprintf("%.0f + %.0f, %.0f + %.0f", c.Nodes, c.Bench, n.Nodes, n.Bench)
		}
		fmt.Fprintf(w, "  %5d %5d  %10s %10s %8.2f   %s\n", p.Batch, p.Pairs, thousands(p.KubeMQMsgsPerS), thousands(p.HTTPMsgsPerS), p.Ratio, cpu)
	}
	if l := k.Wake; l != nil {
		fmt.Fprintf(w, "  Downstream Get wake latency, %d samples: p50 %.2f ms   p90 %.2f ms   p99 %.2f ms   (SendQueueMessage p50 %.2f ms)\n",
			l.Samples, l.P50, l.P90, l.P99, l.SendP50)
	}
	fmt.Fprintln(w)
}
