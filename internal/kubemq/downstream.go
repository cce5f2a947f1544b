package kubemq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/skipq/skipq/internal/kubemq/kubemqpb"
	"github.com/skipq/skipq/internal/service"
)

// Downstream's answers, as KubeMQ words them (they carry no code).
const (
	errTransactionNotFound = "transaction is completed or transaction id not found"
	errRequeueNoChannel    = "cannot requeue messages with empty channel destination "
	errRequestUnknown      = "request unknown"
)

// renewEvery is how often a downstream call looks for leases to renew;
// each is renewed once half of it has passed.
const renewEvery = 250 * time.Millisecond

type downstreamStream = grpc.BidiStreamingServer[kubemqpb.QueuesDownstreamRequest, kubemqpb.QueuesDownstreamResponse]

// QueuesDownstream is KubeMQ's long-lived receive stream. Each Get claims
// messages and answers them under a new transaction id; the transaction's
// messages stay leased while the call lives (the node renews their leases,
// so a node that dies lets them lapse after the queue's visibility and
// nothing is lost) until the client settles them by transaction and
// sequence, or the call ends and releases them. Requests are served in
// order; settlements answer only when they fail. The server ends the call
// only when the node shuts down (CloseByServer first).
func (a *api) QueuesDownstream(stream downstreamStream) error {
	ctx := stream.Context()
	reqs, recvErr := receiveAll(ctx, stream.Recv)
	d := &downstream{s: a.s, txs: map[string]*transaction{}}
	renewCtx, stopRenewing := context.WithCancel(ctx)
	var renewing sync.WaitGroup
	renewing.Go(func() { d.renew(renewCtx) })
	defer func() {
		stopRenewing()
		renewing.Wait()
		d.releaseAll(context.WithoutCancel(ctx))
	}()
	for {
		select {
		case r := <-reqs:
			resp, err := d.handle(ctx, r)
			if err != nil {
				return statusOf(err)
			}
			if resp != nil {
				if err := stream.Send(resp); err != nil {
					return err
				}
			}
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-a.s.closing:
			d.releaseAll(context.WithoutCancel(ctx))
			return stream.Send(&kubemqpb.QueuesDownstreamResponse{RequestTypeData: kubemqpb.QueuesDownstreamRequestType_CloseByServer})
		case <-ctx.Done():
			return nil
		}
	}
}

// downstream is a QueuesDownstream call's transactions.
type downstream struct {
	s   *Server
	mu  sync.Mutex
	txs map[string]*transaction
}

// transaction is the messages one Get handed out and not yet settled.
type transaction struct {
	held    map[int64]string // receipt handle by sequence
	lease   int              // seconds each renewal grants
	renewAt time.Time
}

// handle serves one request: its answer (nil: none), or the error that
// ends the call.
func (d *downstream) handle(ctx context.Context, r *kubemqpb.QueuesDownstreamRequest) (*kubemqpb.QueuesDownstreamResponse, error) {
	resp := &kubemqpb.QueuesDownstreamResponse{TransactionId: r.GetRefTransactionId(),
		RefRequestId: requestID(r.GetRequestID()), RequestTypeData: r.GetRequestTypeData()}
	var err error
	switch t := r.GetRequestTypeData(); t {
	case kubemqpb.QueuesDownstreamRequestType_Get:
		resp.TransactionId = requestID("")
		err = d.get(ctx, r, resp)
	case kubemqpb.QueuesDownstreamRequestType_AckAll, kubemqpb.QueuesDownstreamRequestType_NAckAll,
		kubemqpb.QueuesDownstreamRequestType_ReQueueAll:
		err = d.settle(ctx, t, r.GetRefTransactionId(), nil, r.GetReQueueChannel())
	case kubemqpb.QueuesDownstreamRequestType_AckRange, kubemqpb.QueuesDownstreamRequestType_NAckRange,
		kubemqpb.QueuesDownstreamRequestType_ReQueueRange:
		if len(r.GetSequenceRange()) == 0 {
			err = refuse(fmt.Sprintf("cannot %s empty list of of offsets", verbOf(t)))
			break
		}
		err = d.settle(ctx, t, r.GetRefTransactionId(), r.GetSequenceRange(), r.GetReQueueChannel())
	case kubemqpb.QueuesDownstreamRequestType_ActiveOffsets:
		d.mu.Lock()
		tx := d.txs[r.GetRefTransactionId()]
		if tx != nil {
			resp.ActiveOffsets = slices.Sorted(maps.Keys(tx.held))
		}
		d.mu.Unlock()
		if tx == nil {
			err = refuse(errTransactionNotFound)
			break
		}
		return resp, nil
	case kubemqpb.QueuesDownstreamRequestType_TransactionStatus:
		d.mu.Lock()
		resp.TransactionComplete = d.txs[r.GetRefTransactionId()] == nil
		d.mu.Unlock()
		return resp, nil
	case kubemqpb.QueuesDownstreamRequestType_CloseByClient:
		d.mu.Lock()
		tx := d.txs[r.GetRefTransactionId()]
		delete(d.txs, r.GetRefTransactionId())
		d.mu.Unlock()
		if tx != nil {
			d.release(context.WithoutCancel(ctx), slices.Collect(maps.Values(tx.held)))
		}
	default:
		resp.RequestTypeData = kubemqpb.QueuesDownstreamRequestType_PollRequestTypeUnknown
		err = refuse(errRequestUnknown)
	}
	text, callErr := answer(err)
	if callErr != nil {
		if r.GetRequestTypeData() == kubemqpb.QueuesDownstreamRequestType_Get {
			return nil, callErr
		}
		// A settlement the database could not take: its messages stay
		// leased until their leases end (they are no longer renewed).
		text = status.Convert(callErr).Message()
	}
	if text == "" {
		if r.GetRequestTypeData() == kubemqpb.QueuesDownstreamRequestType_Get {
			return resp, nil
		}
		return nil, nil
	}
	resp.IsError, resp.Error = true, text
	return resp, nil
}

// get claims up to MaxItems messages, waiting up to WaitTimeout
// milliseconds (whole seconds, rounded up) for the first.
func (d *downstream) get(ctx context.Context, r *kubemqpb.QueuesDownstreamRequest, resp *kubemqpb.QueuesDownstreamResponse) error {
	lim := d.s.svc.Limits()
	if err := checkClientAndChannel(r.GetClientID(), r.GetChannel()); err != nil {
		return err
	}
	if n := r.GetMaxItems(); n < 1 || int(n) > lim.MaxReceiveMessages {
		return refuse(errMaxItems)
	}
	if w := r.GetWaitTimeout(); w < 1000 || int(w) > lim.MaxWaitSeconds*1000 {
		return refuse(errWaitMillis)
	}
	items, wait := int(r.GetMaxItems()), int(math.Ceil(float64(r.GetWaitTimeout())/1000))
	msgs, err := d.s.svc.Receive(ctx, identityOf(ctx).tenant, r.GetChannel(), service.ReceiveOptions{
		MaxMessages: &items, WaitSeconds: &wait, AutoAck: r.GetAutoAck()})
	if err != nil {
		return err
	}
	resp.Messages = queueMessages(msgs)
	if r.GetAutoAck() || len(msgs) == 0 {
		return nil
	}
	tx := &transaction{held: make(map[int64]string, len(msgs))}
	for _, m := range msgs {
		tx.held[m.Sequence] = m.ReceiptHandle
	}
	// The queue's visibility, as the claim granted it.
	lease := time.Duration(defaultVisibilitySeconds) * time.Second
	if until := msgs[0].VisibleUntil; until != nil {
		lease = time.Until(*until)
	}
	tx.lease = max(1, int(math.Ceil(lease.Seconds())))
	tx.renewAt = time.Now().Add(lease / 2)
	d.mu.Lock()
	d.txs[resp.TransactionId] = tx
	d.mu.Unlock()
	return nil
}

func verbOf(t kubemqpb.QueuesDownstreamRequestType) string {
	switch t {
	case kubemqpb.QueuesDownstreamRequestType_NAckAll, kubemqpb.QueuesDownstreamRequestType_NAckRange:
		return "nack"
	case kubemqpb.QueuesDownstreamRequestType_ReQueueAll, kubemqpb.QueuesDownstreamRequestType_ReQueueRange:
		return "requeue"
	default:
		return "ack"
	}
}

// settle acks, nacks or requeues the sequences of transaction txID (all
// of them when seqs is nil); the transaction ends when nothing is left.
func (d *downstream) settle(ctx context.Context, t kubemqpb.QueuesDownstreamRequestType, txID string, seqs []int64, requeueTo string) error {
	verb := verbOf(t)
	if verb == "requeue" && requeueTo == "" {
		return refuse(errRequeueNoChannel)
	}
	if verb == "requeue" && service.ValidQueueName(requeueTo) != "" {
		return refuse(errQueueName)
	}
	d.mu.Lock()
	tx := d.txs[txID]
	if tx == nil {
		d.mu.Unlock()
		return refuse(errTransactionNotFound)
	}
	if seqs == nil {
		seqs = slices.Collect(maps.Keys(tx.held))
	}
	handles := make([]string, 0, len(seqs))
	for _, seq := range seqs {
		if _, ok := tx.held[seq]; !ok {
			d.mu.Unlock()
			return refuse(fmt.Sprintf("invalid %s sequence id %d", verb, seq))
		}
	}
	for _, seq := range seqs {
		handles = append(handles, tx.held[seq])
		delete(tx.held, seq)
	}
	if len(tx.held) == 0 {
		delete(d.txs, txID)
	}
	d.mu.Unlock()
	var err error
	switch verb {
	case "nack":
		_, err = d.s.svc.Nack(ctx, handles, nil)
	case "requeue":
		_, err = d.s.svc.Requeue(ctx, handles, requeueTo)
		if service.KindOf(err) == service.KindQueueTypeMismatch {
			return refuseDetail(errSendFailed, err)
		}
	default:
		_, err = d.s.svc.Ack(ctx, handles)
	}
	return err
}

// renew extends the leases of the call's transactions once half of each
// has passed, until ctx ends. A message whose lease could not be renewed
// (it ran out while the node was away) is dropped from its transaction.
func (d *downstream) renew(ctx context.Context) {
	tick := time.NewTicker(renewEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		type due struct {
			tx      *transaction
			handles []string
		}
		var dues []due
		now := time.Now()
		d.mu.Lock()
		for _, tx := range d.txs {
			if !now.Before(tx.renewAt) {
				dues = append(dues, due{tx, slices.Collect(maps.Values(tx.held))})
			}
		}
		d.mu.Unlock()
		for _, u := range dues {
			res, err := d.s.svc.SetVisibility(ctx, u.handles, u.tx.lease)
			if err != nil {
				d.s.cfg.Log.Warn("kubemq: renewing a downstream transaction's leases failed; retrying", "err", err)
				continue
			}
			d.mu.Lock()
			u.tx.renewAt = time.Now().Add(time.Duration(u.tx.lease) * time.Second / 2)
			for _, f := range res.Failed {
				for seq, h := range u.tx.held {
					if h == f.ReceiptHandle {
						delete(u.tx.held, seq)
					}
				}
			}
			d.mu.Unlock()
		}
	}
}

// releaseAll releases every message the call holds.
func (d *downstream) releaseAll(ctx context.Context) {
	d.mu.Lock()
	var handles []string
	for id, tx := range d.txs {
		handles = append(handles, slices.Collect(maps.Values(tx.held))...)
		delete(d.txs, id)
	}
	d.mu.Unlock()
	d.release(ctx, handles)
}

// release makes held messages available again at once (a nack: the
// delivery counts, as one whose lease ran out).
func (d *downstream) release(ctx context.Context, handles []string) {
	for chunk := range slices.Chunk(handles, service.MaxReceiptHandles) {
		if _, err := d.s.svc.Nack(ctx, chunk, nil); err != nil {
			d.s.cfg.Log.Warn("kubemq: releasing a downstream transaction failed; its leases will end it", "err", err)
		}
	}
}
