package natstest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Strand leaves a message stranded in a work-queue stream — held at or below its consumer's ack
// floor, never delivered again — without a server crash, on any nats-server version. It creates
// the stream (capturing subject) and a durable consumer of the same name with MaxDeliver 1, and
// publishes "stuck" and "fine". Both are delivered; "stuck" is never acknowledged, so once its
// AckWait (500ms) lapses the server gives up on it (its max-deliveries advisory says so), and the
// acknowledgement of "fine" then moves the floor past it. It returns the stranded message's
// stream sequence. (A crash of a 2.9 server strands acknowledged messages the same way: the
// consumer's floor passes messages the stream still holds.)
func Strand(ctx context.Context, js jetstream.JetStream, stream, subject string) (uint64, error) {
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Retention: jetstream.WorkQueuePolicy})
	if err != nil {
		return 0, fmt.Errorf("natstest.Strand: stream %s: %w", stream, err)
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: stream, FilterSubject: subject,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 500 * time.Millisecond, MaxDeliver: 1})
	if err != nil {
		return 0, fmt.Errorf("natstest.Strand: consumer %s: %w", stream, err)
	}
	advisory, err := js.Conn().SubscribeSync("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + stream + "." + stream)
	if err != nil {
		return 0, fmt.Errorf("natstest.Strand: %w", err)
	}
	defer func() { _ = advisory.Unsubscribe() }()
	for _, body := range []string{"stuck", "fine"} {
		if _, err := js.Publish(ctx, subject, []byte(body)); err != nil {
			return 0, fmt.Errorf("natstest.Strand: publish: %w", err)
		}
	}
	stuck, fine, err := fetchTwo(cons)
	if err != nil {
		return 0, err
	}
	md, err := stuck.Metadata()
	if err != nil {
		return 0, err
	}
	if err := waitGivenUp(ctx, cons, fine, advisory); err != nil {
		return 0, err
	}
	if err := fine.DoubleAck(ctx); err != nil {
		return 0, fmt.Errorf("natstest.Strand: ack: %w", err)
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		return 0, err
	}
	if ci.AckFloor.Stream < md.Sequence.Stream || ci.NumAckPending != 0 {
		return 0, errors.New("natstest.Strand: the consumer's ack floor did not pass the stuck message")
	}
	return md.Sequence.Stream, nil
}

// fetchTwo fetches "stuck" and "fine".
func fetchTwo(cons jetstream.Consumer) (stuck, fine jetstream.Msg, err error) {
	var got []jetstream.Msg
	for len(got) < 2 {
		b, err := cons.Fetch(2-len(got), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, nil, fmt.Errorf("natstest.Strand: fetch: %w", err)
		}
		n := len(got)
		for m := range b.Messages() {
			got = append(got, m)
		}
		if len(got) == n {
			return nil, nil, fmt.Errorf("natstest.Strand: nothing fetched: %v", b.Error())
		}
	}
	if string(got[0].Data()) != "stuck" || string(got[1].Data()) != "fine" {
		return nil, nil, fmt.Errorf("natstest.Strand: fetched %q, %q", got[0].Data(), got[1].Data())
	}
	return got[0], got[1], nil
}

// waitGivenUp sends pull requests, which make the server look at what is due again, until its
// max-deliveries advisory says it gave up on "stuck"; "fine" is kept in progress meanwhile.
func waitGivenUp(ctx context.Context, cons jetstream.Consumer, fine jetstream.Msg, advisory *nats.Subscription) error {
	for {
		if err := fine.InProgress(); err != nil {
			return fmt.Errorf("natstest.Strand: %w", err)
		}
		b, err := cons.Fetch(1, jetstream.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			return fmt.Errorf("natstest.Strand: fetch: %w", err)
		}
		for m := range b.Messages() {
			return fmt.Errorf("natstest.Strand: %q delivered again past MaxDeliver 1", m.Data())
		}
		if _, err := advisory.NextMsg(10 * time.Millisecond); err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("natstest.Strand: no max-deliveries advisory: %w", ctx.Err())
		}
	}
}
