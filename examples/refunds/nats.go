package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/settlehq/settle/core"
	natsjs "github.com/settlehq/settle/transport-nats"
	"github.com/settlehq/settle/transport-nats/natstest"
)

// EmbeddedNATS is the -nats value that runs the service on an in-process nats-server with
// JetStream, storing in a temporary directory removed at exit.
const EmbeddedNATS = "embedded"

// NATSSubjects are the NATS mode's subjects, with the -prefix flag in front: refunds are
// published to Refunds, and dead letters go to RefundsDead.
type NATSSubjects struct{ Refunds, RefundsDead string }

// NATSSubjectsWith returns the subjects with prefix in front of each.
func NATSSubjectsWith(prefix string) NATSSubjects {
	return NATSSubjects{prefix + Queue, prefix + DeadQueue}
}

// HandleRefundDeadNATS logs a refund moved to the dead letter with what its copy's headers say:
// the deliveries it was given and the last failure.
func HandleRefundDeadNATS(log *slog.Logger) core.Handler[Refund] {
	return func(_ context.Context, m *core.Message[Refund]) error {
		h := m.Headers()
		n, err := core.ParseCount(h[core.HeaderRetryCount])
		if err != nil {
			log.Warn("dead letter without a readable count", "message_id", m.ID(), "error", err)
		}
		log.Warn("dead letter: refund gave up", "ref", m.Payload.Ref, "card", m.Payload.Card, "message_id", m.ID(),
			"attempts", n, "last_error", h[core.HeaderError], "dead_at", h[core.HeaderDeadAt])
		return nil
	}
}

// MountNATS subscribes the refunds handler on the JetStream queue s.Refunds (a stream with a
// durable pull consumer; busy refunds wait their backoff on the server, a -NAK with delay) with
// DeadLetterAfter(5, s.RefundsDead), and a reader on the dead letter's own queue.
func MountNATS(app *core.App, conn *natsjs.Conn, s NATSSubjects, base time.Duration) error {
	log := app.Logger()
	refunds, err := natsjs.NewQueue(conn, s.Refunds)
	if err != nil {
		return err
	}
	dead, err := natsjs.NewQueue(conn, s.RefundsDead)
	if err != nil {
		return err
	}
	if err := core.Subscribe(app, refunds, HandleRefund(log), core.DeadLetterAfter(MaxAttempts, s.RefundsDead), Policy(base)); err != nil {
		return err
	}
	return core.Subscribe(app, dead, HandleRefundDeadNATS(log))
}

// natsURL resolves the -nats flag: EmbeddedNATS starts an in-process server (stopped and removed
// by the returned function), anything else is a server URL.
func natsURL(flag string, log *slog.Logger) (string, func(), error) {
	if flag != EmbeddedNATS {
		return flag, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "refunds-nats-")
	if err != nil {
		return "", nil, err
	}
	srv, err := natstest.Start(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, err
	}
	log.Info("running an embedded nats-server with JetStream", "url", srv.URL(), "store", dir)
	return srv.URL(), func() { srv.Shutdown(); _ = os.RemoveAll(dir) }, nil
}

// RunNATS runs the service on the NATS server at url, declaring its streams and consumers: the
// demo (publish the samples, process them, print where each ended, return) or, with Serve, until
// ctx ends.
func RunNATS(ctx context.Context, c Config, url string, out io.Writer, log *slog.Logger, appOpts ...core.AppOption) error {
	if c.Backoff < 0 {
		return fmt.Errorf("-backoff %v: must not be negative", c.Backoff)
	}
	s := NATSSubjectsWith(c.Prefix)
	tally := NewTallyFor(map[string]string{s.Refunds: s.RefundsDead})
	app := core.New(append([]core.AppOption{core.WithLogger(log), core.WithObserver(tally.Observe), core.WithoutSignals()}, appOpts...)...)
	conn, err := natsjs.New(url, natsjs.DeclareTopology(true), natsjs.WithLogger(log), natsjs.WithClock(app.Clock()))
	if err != nil {
		return err
	}
	app.Register(conn)
	if err := MountNATS(app, conn, s, c.Backoff); err != nil {
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
		fmt.Fprintf(out, "serving %s and %s on NATS JetStream at %s; Ctrl-C stops\n", s.Refunds, s.RefundsDead, url)
	} else {
		if err := seedNATS(ctx, conn, s, tally); err != nil {
			cancel()
			<-ran
			return fmt.Errorf("publishing the samples: %w", err)
		}
		fmt.Fprintf(out, "published %d refunds to %s; processing…\n", len(Samples), s.Refunds)
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
			return errors.New("stopped before every refund ended")
		}
		tally.Print(out)
	}
	return nil
}

// seedNATS publishes the samples, each with a message id of its own (ref and a random suffix, so
// that runs on the same server do not mix, nor fall in the stream's duplicate window), and
// tracks them (all before the first is published: the tally is done when every tracked refund
// has ended).
func seedNATS(ctx context.Context, conn *natsjs.Conn, s NATSSubjects, t *Tally) error {
	suffix := "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, r := range Samples {
		t.Track(r.Ref+suffix, r.Ref)
	}
	for _, r := range Samples {
		if _, err := natsjs.Publish(ctx, conn, s.Refunds, r, natsjs.WithMsgID(r.Ref+suffix)); err != nil {
			return err
		}
	}
	return nil
}

// PublishOneNATS publishes one refund (JSON) to subject on the NATS server at url, with ref as
// its message id: the publish subcommand with -nats.
func PublishOneNATS(ctx context.Context, url, subject string, r Refund) error {
	conn, err := natsjs.New(url, natsjs.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = natsjs.Publish(ctx, conn, subject, r, natsjs.WithMsgID(r.Ref))
	return err
}
