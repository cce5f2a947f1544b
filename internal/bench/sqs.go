package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQSMatrix is the sqs scenario's points (issue #15): single messages by
// 16 pairs, and SQS's largest batch by 4.
var SQSMatrix = []Point{{1, 16}, {10, 4}}

// SQSPoint is one point of the sqs scenario: the lifecycle through
// aws-sdk-go-v2 next to the same lifecycle over the native HTTP API. Each
// side's window has its own evidence: in its cpu_us_per_message,
// node_processes is the node's CPU per message and bench_process that
// side's load generators' (the node runs in a process of its own).
type SQSPoint struct {
	Batch        int       `json:"batch"`
	Pairs        int       `json:"pairs"`
	SQSMsgsPerS  float64   `json:"sqs_msgs_per_s"`
	HTTPMsgsPerS float64   `json:"http_msgs_per_s"`
	Ratio        float64   `json:"ratio"` // SQS / native HTTP
	SQS          *RunStats `json:"sqs_run,omitempty"`
	HTTP         *RunStats `json:"http_run,omitempty"`
}

// SQSResult is the sqs scenario: throughput points and the wake latency
// of a long poll over SQS.
type SQSResult struct {
	Points []SQSPoint     `json:"points"`
	Wake   *LatencyResult `json:"wake_ms"`
}

// sqsClient is an aws-sdk-go-v2 SQS client as an application builds it
// (default options, checksum validation on) pointed at base, on the
// bench's HTTP transport so both sides pool connections alike. Credentials
// come from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY when set (nodes with
// auth on), else any (auth off).
func (e *env) sqsClient(base string) *sqs.Client {
	akid, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if akid == "" {
		akid, secret = "bench", "bench"
	}
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(base),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret, Source: "bench"}, nil
		}),
		HTTPClient: e.http.hc,
	})
}

// sqsWorkload is the lifecycle through aws-sdk-go-v2: SendMessage or
// SendMessageBatch, ReceiveMessage (long poll), DeleteMessage or
// DeleteMessageBatch; pair i talks to node i mod N.
type sqsWorkload struct {
	clients []*sqs.Client
	urls    []string
	batch   int
	entries []types.SendMessageBatchRequestEntry
}

func (e *env) newSQSWorkload(ctx context.Context, ns *nodes, queue string, p Point) (*sqsWorkload, error) {
	w := &sqsWorkload{batch: p.Batch}
	for i := range p.Pairs {
		c := e.sqsClient(ns.at(i))
		out, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(queue)})
		if err != nil {
			return nil, err
		}
		w.clients, w.urls = append(w.clients, c), append(w.urls, *out.QueueUrl)
	}
	body := string(sendBody(1))
	for i := range p.Batch {
		w.entries = append(w.entries, types.SendMessageBatchRequestEntry{Id: aws.String("m" + strconv.Itoa(i)), MessageBody: aws.String(body)})
	}
	return w, nil
}

func (w *sqsWorkload) produce(ctx context.Context, i int) (int, error) {
	c, u := w.clients[i], &w.urls[i]
	if w.batch == 1 {
		_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: u, MessageBody: w.entries[0].MessageBody})
		return 1, err
	}
	out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: u, Entries: w.entries})
	if err == nil && len(out.Failed) > 0 {
		err = fmt.Errorf("SendMessageBatch: %d entries failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
	}
	return w.batch, err
}

func (w *sqsWorkload) consume(ctx context.Context, i int) (int, error) {
	c, u := w.clients[i], &w.urls[i]
	got, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: u, MaxNumberOfMessages: int32(w.batch), WaitTimeSeconds: 1})
	if err != nil || len(got.Messages) == 0 {
		return 0, err
	}
	if len(got.Messages) == 1 {
		_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: u, ReceiptHandle: got.Messages[0].ReceiptHandle})
		return 1, err
	}
	entries := make([]types.DeleteMessageBatchRequestEntry, len(got.Messages))
	for j, m := range got.Messages {
		entries[j] = types.DeleteMessageBatchRequestEntry{Id: aws.String("d" + strconv.Itoa(j)), ReceiptHandle: m.ReceiptHandle}
	}
	out, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: u, Entries: entries})
	if err == nil && len(out.Failed) > 0 {
		err = fmt.Errorf("DeleteMessageBatch: %d entries failed", len(out.Failed))
	}
	return len(got.Messages), err
}

// sqsScenario runs each point through aws-sdk-go-v2 and over the native
// HTTP API (a fresh queue each), then measures the wake latency of SQS
// long polls. The nodes run in processes of their own, so that both
// sides' load generators share the bench's process and neither shares
// the node's.
func (e *env) sqsScenario(ctx context.Context) (*SQSResult, error) {
	ns, err := e.startNodeProcesses(ctx)
	if err != nil {
		return nil, err
	}
	defer ns.stop()
	res := &SQSResult{}
	for _, p := range e.o.SQSMatrix {
		sp := SQSPoint{Batch: p.Batch, Pairs: p.Pairs}
		q := queueName(fmt.Sprintf("sqs-b%d-p%d", p.Batch, p.Pairs))
		if err := e.http.createQueue(ctx, ns.at(0), q, ""); err != nil {
			return nil, err
		}
		w, err := e.newSQSWorkload(ctx, ns, q, p)
		if err != nil {
			return nil, err
		}
		e.checkpoint(ctx)
		e.logf("sqs batch %d × %d pairs through aws-sdk-go-v2", p.Batch, p.Pairs)
		// --cpuprofile without the lifecycle scenario profiles the node in
		// the SQS batch-1 window, --cpuprofile-native in the native one.
		var prof, profNative io.Writer
		if p.Batch == 1 && !e.o.runs(Lifecycle) {
			prof, profNative = e.o.CPUProfile, e.o.CPUProfileNative
		}
		if sp.SQSMsgsPerS, sp.SQS, err = e.drive(ctx, w, p, prof); err != nil {
			return nil, fmt.Errorf("SQS batch %d × %d: %w", p.Batch, p.Pairs, err)
		}
		if err := e.deleteLeftovers(ctx, q); err != nil {
			return nil, err
		}
		if sp.HTTPMsgsPerS, sp.HTTP, err = e.nativeBeside(ctx, ns, "sqs", p, profNative); err != nil {
			return nil, err
		}
		sp.SQSMsgsPerS, sp.HTTPMsgsPerS = round(sp.SQSMsgsPerS, 0), round(sp.HTTPMsgsPerS, 0)
		if sp.HTTPMsgsPerS > 0 {
			sp.Ratio = round(sp.SQSMsgsPerS/sp.HTTPMsgsPerS, 3)
		}
		e.logf("  SQS %.0f msgs/s, native HTTP %.0f msgs/s, ratio %.2f", sp.SQSMsgsPerS, sp.HTTPMsgsPerS, sp.Ratio)
		if sp.SQS != nil && sp.HTTP != nil {
			e.logf("  CPU µs a message, node / load generators: SQS %.0f / %.0f, native %.0f / %.0f",
				sp.SQS.CPUPerMessage.Nodes, sp.SQS.CPUPerMessage.Bench, sp.HTTP.CPUPerMessage.Nodes, sp.HTTP.CPUPerMessage.Bench)
		}
		res.Points = append(res.Points, sp)
	}
	if res.Wake, err = e.sqsWake(ctx, ns); err != nil {
		return res, err
	}
	return res, nil
}

// nativeBeside is the native HTTP lifecycle of point p on a fresh queue,
// the figure another protocol's scenario (kind) compares with: acked
// msgs/s and the window's evidence; profile as drive's. Its consumers ack
// apart from their receives whatever Options.ConsumerShape says: SQS's and
// KubeMQ's consumers do, and the ratio measures what the protocol costs
// the node for the same requests.
func (e *env) nativeBeside(ctx context.Context, ns *nodes, kind string, p Point, profile io.Writer) (float64, *RunStats, error) {
	q := queueName(fmt.Sprintf("%s-native-b%d-p%d", kind, p.Batch, p.Pairs))
	if err := e.http.createQueue(ctx, ns.at(0), q, ""); err != nil {
		return 0, nil, err
	}
	e.checkpoint(ctx)
	e.logf("%s batch %d × %d pairs over the native HTTP API", kind, p.Batch, p.Pairs)
	msgsPerS, stats, err := e.drive(ctx, newHTTPWorkload(e.http, ns, q, p, AckSeparately), p, profile)
	if err != nil {
		return 0, nil, fmt.Errorf("native batch %d × %d: %w", p.Batch, p.Pairs, err)
	}
	return msgsPerS, stats, e.deleteLeftovers(ctx, q)
}

// sqsWake is the latency scenario over SQS: receivers waiting in
// ReceiveMessage long polls, one SendMessage at a time; each sample is the
// time from the send's answer to the waiting receive's answer.
func (e *env) sqsWake(ctx context.Context, ns *nodes) (*LatencyResult, error) {
	q := queueName("sqs-wake")
	if err := e.http.createQueue(ctx, ns.at(0), q, ""); err != nil {
		return nil, err
	}
	sender := e.sqsClient(ns.at(0))
	out, err := sender.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q)})
	if err != nil {
		return nil, err
	}
	qurl := out.QueueUrl
	e.logf("sqs wake latency: %d samples", e.o.LatencySamples)
	rctx, stop := context.WithCancel(ctx)
	arrivals := make(chan arrival, latencyReceivers)
	errc := make(chan error, latencyReceivers)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	for i := range latencyReceivers {
		c := e.sqsClient(ns.at(i))
		wg.Go(func() {
			for rctx.Err() == nil {
				got, err := c.ReceiveMessage(rctx, &sqs.ReceiveMessageInput{QueueUrl: qurl, WaitTimeSeconds: 20})
				at := time.Now()
				if err == nil {
					for _, m := range got.Messages {
						arrivals <- arrival{at, aws.ToString(m.Body)}
						_, err = c.DeleteMessage(rctx, &sqs.DeleteMessageInput{QueueUrl: qurl, ReceiptHandle: m.ReceiptHandle})
					}
				}
				if err != nil {
					if rctx.Err() == nil {
						errc <- err
					}
					return
				}
			}
		})
	}
	if err := e.waitForWaiters(ctx, ns.urls, latencyReceivers, 30*time.Second); err != nil {
		return nil, err
	}
	return e.sampleWakes(ctx, func(ctx context.Context, body string) error {
		_, err := sender.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: qurl, MessageBody: aws.String(body)})
		return err
	}, arrivals, errc, "wake-", "waiting SQS receive")
}

// writeSQS is the SQS section of the text report.
func writeSQS(w io.Writer, sq *SQSResult) {
	fmt.Fprintf(w, "SQS (aws-sdk-go-v2) next to the native HTTP API, lifecycle messages/s acked\n")
	fmt.Fprintf(w, "  %5s %5s  %10s %10s %8s   %s\n", "batch", "pairs", "SQS", "native", "SQS/nat", "CPU µs/msg node + load generators: SQS, native")
	for _, p := range sq.Points {
		cpu := ""
		if p.SQS != nil && p.HTTP != nil {
			s, n := p.SQS.CPUPerMessage, p.HTTP.CPUPerMessage
			cpu = fmt.Sprintf("%.0f + %.0f, %.0f + %.0f", s.Nodes, s.Bench, n.Nodes, n.Bench)
		}
		fmt.Fprintf(w, "  %5d %5d  %10s %10s %8.2f   %s\n", p.Batch, p.Pairs, thousands(p.SQSMsgsPerS), thousands(p.HTTPMsgsPerS), p.Ratio, cpu)
	}
	if l := sq.Wake; l != nil {
		fmt.Fprintf(w, "  SQS long-poll wake latency, %d samples: p50 %.2f ms   p90 %.2f ms   p99 %.2f ms   (SendMessage p50 %.2f ms)\n",
			l.Samples, l.P50, l.P90, l.P99, l.SendP50)
	}
	fmt.Fprintln(w)
}
