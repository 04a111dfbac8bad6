package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/settlehq/settle/core"
	amqp "github.com/settlehq/settle/transport-amqp"
)

// The RabbitMQ mode's payout queues; the refunds use Queue and DeadQueue.
const (
	PayoutQueue     = "payouts"
	PayoutDeadQueue = "payouts.dead"
)

// Payout is one payout request, as a message's JSON body.
type Payout struct {
	// Ref is the merchant's reference.
	Ref string `json:"ref"`
	// Card is the card to pay to; its prefix decides what the fake processor says.
	Card string `json:"card"`
	// Cents is the amount.
	Cents int64 `json:"cents"`
}

// PayoutSamples are the RabbitMQ demo's payouts: one of each kind.
var PayoutSamples = []Payout{
	{Ref: "p-ok-1", Card: "4242-4242", Cents: 10000},
	{Ref: "p-busy-1", Card: "busy-4000", Cents: 2500},
	{Ref: "p-down-1", Card: "down-3000", Cents: 7000},
	{Ref: "p-closed-1", Card: "closed-2000", Cents: 900},
}

// HandlePayout sends a payout: busy and unavailable both retry at once (the quorum queue counts
// the deliveries and moves the payout to payouts.dead after the fifth), declined drops.
func HandlePayout(log *slog.Logger) core.Handler[Payout] {
	return func(ctx context.Context, m *core.Message[Payout]) error {
		err := Process(ctx, Refund(m.Payload))
		switch {
		case err == nil:
			log.Info("paid out", "ref", m.Payload.Ref, "cents", m.Payload.Cents, "attempt", m.Attempt())
			return nil
		case errors.Is(err, ErrBusy), errors.Is(err, ErrUnavailable):
			return core.Retry().Because(err)
		case errors.Is(err, ErrDeclined):
			log.Warn("payout declined; dropping it", "ref", m.Payload.Ref, "card", m.Payload.Card, "message_id", m.ID(), "attempt", m.Attempt())
			return core.Drop().Because(err)
		}
		return err
	}
}

// HandleRefundDeadAMQP logs a refund the service moved to refunds.dead, with why it died: the
// dead letter's settle-* headers (core.DeadLetterInfo) give its deliveries, origin and last
// failure.
func HandleRefundDeadAMQP(log *slog.Logger) core.Handler[Refund] {
	return func(_ context.Context, m *core.Message[Refund]) error {
		logDead(log, "dead letter: refund gave up", m.Headers(), "ref", m.Payload.Ref, "card", m.Payload.Card, "message_id", m.ID())
		return nil
	}
}

// HandlePayoutDead logs a payout moved to payouts.dead. settle moves a payout at its cap itself,
// with the same headers as a refund's dead letter; the quorum queue's delivery limit only backs
// that up for a payout whose deliveries never settle (then RabbitMQ's x-death says why).
func HandlePayoutDead(log *slog.Logger) core.Handler[Payout] {
	return func(_ context.Context, m *core.Message[Payout]) error {
		logDead(log, "dead letter: payout gave up", m.Headers(), "ref", m.Payload.Ref, "card", m.Payload.Card, "message_id", m.ID())
		return nil
	}
}

func logDead(log *slog.Logger, msg string, h map[string]string, attrs ...any) {
	info, ok, err := core.ParseDeadLetterInfo(h)
	if !ok {
		log.Warn(msg+" (moved by the server, without settle's headers)", attrs...)
		return
	}
	if err != nil {
		attrs = append(attrs, "header_error", err)
	}
	log.Warn(msg, append(attrs, "attempts", info.Count, "origin", info.Origin, "reason", info.Error, "dead_at", info.At)...)
}

// Names are the RabbitMQ mode's queue names, with the -prefix flag in front.
type Names struct {
	Refunds, RefundsDead, Payouts, PayoutsDead string
}

// NamesWith returns the queue names with prefix in front of each.
func NamesWith(prefix string) Names {
	return Names{prefix + Queue, prefix + DeadQueue, prefix + PayoutQueue, prefix + PayoutDeadQueue}
}

// MountAMQP subscribes the four handlers: refunds on a classic queue with DLXTTL() (busy refunds
// wait their backoff in the waiting queue refunds.retry on the server) and
// DeadLetterAfter(5, refunds.dead), counted by settle; payouts on a quorum queue with
// DeadLetterAfter(5, payouts.dead), counted and moved by the server; a reader on each dead
// letter. The Broker must declare topology: the quorum cap becomes queue arguments.
func MountAMQP(app *core.App, b *amqp.Broker, n Names, base time.Duration) error {
	log := app.Logger()
	refunds, err := amqp.Classic(b, n.Refunds, amqp.DLXTTL())
	if err != nil {
		return err
	}
	payouts, err := amqp.Quorum(b, n.Payouts)
	if err != nil {
		return err
	}
	refundsDead, err := amqp.Classic(b, n.RefundsDead)
	if err != nil {
		return err
	}
	payoutsDead, err := amqp.Classic(b, n.PayoutsDead)
	if err != nil {
		return err
	}
	if err := core.Subscribe(app, refunds, HandleRefund(log), core.DeadLetterAfter(MaxAttempts, n.RefundsDead), Policy(base)); err != nil {
		return err
	}
	if err := core.Subscribe(app, refundsDead, HandleRefundDeadAMQP(log)); err != nil {
		return err
	}
	if err := core.Subscribe(app, payouts, HandlePayout(log), core.DeadLetterAfter(MaxAttempts, n.PayoutsDead)); err != nil {
		return err
	}
	return core.Subscribe(app, payoutsDead, HandlePayoutDead(log))
}

// RunAMQP runs the service on the RabbitMQ that dial reaches, declaring its topology: the demo
// (publish the samples to refunds and payouts, process them, print where each ended, return)
// or, with Serve, until ctx ends.
func RunAMQP(ctx context.Context, c Config, dial amqp.DialFunc, out io.Writer, log *slog.Logger, appOpts ...core.AppOption) error {
	if c.Backoff < 0 {
		return fmt.Errorf("-backoff %v: must not be negative", c.Backoff)
	}
	n := NamesWith(c.Prefix)
	tally := NewTallyFor(map[string]string{n.Refunds: n.RefundsDead, n.Payouts: n.PayoutsDead})
	app := core.New(append([]core.AppOption{core.WithLogger(log), core.WithObserver(tally.Observe), core.WithoutSignals()}, appOpts...)...)
	b, err := amqp.New(dial, amqp.DeclareTopology(true), amqp.WithLogger(log), amqp.WithClock(app.Clock()))
	if err != nil {
		return err
	}
	app.Register(b)
	if err := MountAMQP(app, b, n, c.Backoff); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- app.Run(runCtx) }()
	select {
	case <-app.Ready():
	case err := <-ran:
		return err
	}
	if c.Serve {
		fmt.Fprintf(out, "serving %s, %s, %s and %s on RabbitMQ; Ctrl-C stops\n", n.Refunds, n.RefundsDead, n.Payouts, n.PayoutsDead)
	} else {
		if err := seedAMQP(ctx, b, n, tally); err != nil {
			cancel()
			<-ran
			return fmt.Errorf("publishing the samples: %w", err)
		}
		fmt.Fprintf(out, "published %d refunds to %s and %d payouts to %s; processing…\n", len(Samples), n.Refunds, len(PayoutSamples), n.Payouts)
		select {
		case <-tally.Done():
			cancel()
		case <-runCtx.Done():
		}
	}
	if err := <-ran; err != nil {
		return err
	}
	if !c.Serve {
		select {
		case <-tally.Done():
		default:
			return errors.New("stopped before every refund and payout ended")
		}
		tally.Print(out)
	}
	return nil
}

// seedAMQP publishes the samples, each with a message id of its own (ref and a random suffix, so
// that runs on the same broker do not mix), and tracks them.
func seedAMQP(ctx context.Context, b *amqp.Broker, n Names, t *Tally) error {
	suffix := "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, r := range Samples {
		id := r.Ref + suffix
		t.Track(id, r.Ref)
		if err := amqp.Publish(ctx, b, "", n.Refunds, r, amqp.WithMessageID(id)); err != nil {
			return err
		}
	}
	for _, p := range PayoutSamples {
		id := p.Ref + suffix
		t.Track(id, p.Ref)
		if err := amqp.Publish(ctx, b, "", n.Payouts, p, amqp.WithMessageID(id)); err != nil {
			return err
		}
	}
	return nil
}

// PublishOne publishes one refund or payout (JSON) to queue on the RabbitMQ that dial reaches,
// with ref as its message id: the publish subcommand.
func PublishOne(ctx context.Context, dial amqp.DialFunc, queue string, r Refund) error {
	b, err := amqp.New(dial, amqp.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return err
	}
	defer b.Close()
	return amqp.Publish(ctx, b, "", queue, r, amqp.WithMessageID(r.Ref), amqp.WithConfirm())
}
