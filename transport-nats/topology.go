package natsjs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// topology is what one subscription needs on the server: the stream capturing the queue's
// subject, the durable pull consumer, and a stream capturing the cap's dead-letter subject.
type topology struct {
	cfg     *queueConfig
	declare bool
	cap     int
	dest    string

	// What ensure found: the queue's stream, and its info.
	st jetstream.Stream
	si *jetstream.StreamInfo
}

// consumerSpec is the consumer settle would declare, and which of its settings were given.
func (t *topology) consumerSpec() jetstream.ConsumerConfig {
	c := t.cfg
	cc := jetstream.ConsumerConfig{
		Durable:       c.durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		FilterSubject: c.subject,
		AckWait:       DefaultAckWait,
		MaxDeliver:    -1,
		MaxAckPending: c.maxAckPending,
	}
	if c.ackWait > 0 {
		cc.AckWait = c.ackWait
	}
	switch {
	case c.maxDeliver > 0:
		cc.MaxDeliver = c.maxDeliver
	case t.cap > 0:
		cc.MaxDeliver = t.cap + BackstopMargin
	}
	return cc
}

// ensure declares (declare) or checks the stream, the consumer and the dead-letter stream, and
// returns the consumer with its configuration as the server holds it.
func (t *topology) ensure(ctx context.Context, js jetstream.JetStream) (jetstream.Consumer, *jetstream.ConsumerInfo, error) {
	c := t.cfg
	if t.cap > 0 && c.maxDeliver > 0 && c.maxDeliver <= t.cap {
		return nil, nil, fmt.Errorf("natsjs.MaxDeliver(%d) with core.DeadLetterAfter(%d, %q): the server would stop delivering before settle counts past the cap; give MaxDeliver above %d",
			c.maxDeliver, t.cap, t.dest, t.cap)
	}
	si, err := t.ensureStream(ctx, js)
	if err != nil {
		return nil, nil, err
	}
	t.si = si
	cons, ci, err := t.ensureConsumer(ctx, js, si)
	if err != nil {
		return nil, nil, err
	}
	if t.cap > 0 {
		if err := t.ensureDeadLetter(ctx, js, si); err != nil {
			return nil, nil, err
		}
	}
	return cons, ci, nil
}

func (t *topology) ensureStream(ctx context.Context, js jetstream.JetStream) (*jetstream.StreamInfo, error) {
	c := t.cfg
	s, err := js.Stream(ctx, c.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if !t.declare {
			return nil, &TopologyError{Kind: "stream", Name: c.stream, Missing: true,
				Hint: fmt.Sprintf("DeclareTopology is off, so settle only checks it: create it capturing %q, or turn natsjs.DeclareTopology(true) on", c.subject)}
		}
		sc := jetstream.StreamConfig{
			Name:      c.stream,
			Subjects:  c.subjects,
			Retention: jetstream.WorkQueuePolicy,
			Storage:   jetstream.FileStorage,
			Replicas:  max(c.replicas, 1),
		}
		if c.retention != nil {
			sc.Retention = *c.retention
		}
		if c.storage != nil {
			sc.Storage = *c.storage
		}
		s, err = js.CreateStream(ctx, sc)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) { // declared by another process meanwhile
			s, err = js.Stream(ctx, c.stream)
		}
		if err != nil {
			return nil, fmt.Errorf("declare stream %q capturing %v: %w", c.stream, c.subjects, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("stream %q: %w", c.stream, err)
	}
	t.st = s
	si := s.CachedInfo()
	var diffs []string
	if !captures(si.Config.Subjects, c.subject) {
		diffs = append(diffs, fmt.Sprintf("subjects: server %v, which do not capture the queue's subject %q", si.Config.Subjects, c.subject))
	}
	if c.replicas > 0 && si.Config.Replicas != c.replicas {
		diffs = append(diffs, fmt.Sprintf("replicas: server %d, declared %d", si.Config.Replicas, c.replicas))
	}
	if c.storage != nil && si.Config.Storage != *c.storage {
		diffs = append(diffs, fmt.Sprintf("storage: server %v, declared %v", si.Config.Storage, *c.storage))
	}
	if c.retention != nil && si.Config.Retention != *c.retention {
		diffs = append(diffs, fmt.Sprintf("retention: server %v, declared %v", si.Config.Retention, *c.retention))
	}
	if len(diffs) > 0 {
		return nil, &TopologyError{Kind: "stream", Name: c.stream, Diffs: diffs,
			Hint: "settle does not change an existing stream: update it, or declare the same settings"}
	}
	return si, nil
}

func (t *topology) ensureConsumer(ctx context.Context, js jetstream.JetStream, si *jetstream.StreamInfo) (jetstream.Consumer, *jetstream.ConsumerInfo, error) {
	c := t.cfg
	name := c.stream + "/" + c.durable
	want := t.consumerSpec()
	cons, err := js.Consumer(ctx, c.stream, c.durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		if !t.declare {
			return nil, nil, &TopologyError{Kind: "consumer", Name: name, Missing: true,
				Hint: fmt.Sprintf("DeclareTopology is off, so settle only checks it: create a durable pull consumer with explicit acks filtered on %q, or turn natsjs.DeclareTopology(true) on", c.subject)}
		}
		cons, err = js.CreateConsumer(ctx, c.stream, want)
		if err != nil {
			if errors.Is(err, jetstream.ErrConsumerExists) { // declared by another process meanwhile
				cons, err = js.Consumer(ctx, c.stream, c.durable)
			}
			if err != nil {
				return nil, nil, fmt.Errorf("declare consumer %q: %w", name, err)
			}
		}
	} else if errors.Is(err, jetstream.ErrNotPullConsumer) {
		return nil, nil, &TopologyError{Kind: "consumer", Name: name,
			Diffs: []string{"deliver_subject: server has one, a push consumer; settle needs a pull consumer (none)"},
			Hint:  "settle does not change an existing consumer: delete it, or name another with natsjs.Durable"}
	} else if err != nil {
		return nil, nil, fmt.Errorf("consumer %q: %w", name, err)
	}
	ci := cons.CachedInfo()
	have := ci.Config
	var diffs []string
	if have.DeliverSubject != "" {
		diffs = append(diffs, fmt.Sprintf("deliver_subject: server %q, a push consumer; settle needs a pull consumer (none)", have.DeliverSubject))
	}
	if have.AckPolicy != jetstream.AckExplicitPolicy {
		diffs = append(diffs, fmt.Sprintf("ack_policy: server %v, settle needs explicit", have.AckPolicy))
	}
	filter := have.FilterSubject
	if filter == "" && len(have.FilterSubjects) == 1 {
		filter = have.FilterSubjects[0]
	}
	if filter != c.subject && !(filter == "" && len(have.FilterSubjects) == 0 && allCoveredBy(si.Config.Subjects, c.subject)) {
		diffs = append(diffs, fmt.Sprintf("filter_subject: server %q%s, declared %q", filter, formatFilters(have.FilterSubjects), c.subject))
	}
	if c.ackWait > 0 && have.AckWait != c.ackWait {
		diffs = append(diffs, fmt.Sprintf("ack_wait: server %v, declared %v", have.AckWait, c.ackWait))
	}
	switch {
	case c.maxDeliver > 0 && have.MaxDeliver != c.maxDeliver:
		diffs = append(diffs, fmt.Sprintf("max_deliver: server %d, declared %d", have.MaxDeliver, c.maxDeliver))
	case c.maxDeliver == 0 && t.cap > 0 && have.MaxDeliver > 0 && have.MaxDeliver <= t.cap:
		diffs = append(diffs, fmt.Sprintf("max_deliver: server %d, which stops deliveries before settle counts past the cap of core.DeadLetterAfter(%d, %q); it must be above %d (settle declares %d)",
			have.MaxDeliver, t.cap, t.dest, t.cap, want.MaxDeliver))
	}
	if c.maxAckPending > 0 && have.MaxAckPending != c.maxAckPending {
		diffs = append(diffs, fmt.Sprintf("max_ack_pending: server %d, declared %d", have.MaxAckPending, c.maxAckPending))
	}
	if c.fetchBatch > 0 && have.MaxRequestBatch > 0 && c.fetchBatch > have.MaxRequestBatch {
		diffs = append(diffs, fmt.Sprintf("max_batch: server %d, below natsjs.FetchBatch(%d): the server refuses every larger pull request", have.MaxRequestBatch, c.fetchBatch))
	}
	if len(diffs) > 0 {
		return nil, nil, &TopologyError{Kind: "consumer", Name: name, Diffs: diffs,
			Hint: "settle does not change an existing consumer: update or delete it, or declare the same settings"}
	}
	return cons, ci, nil
}

// ensureDeadLetter makes sure a stream captures the cap's dead-letter subject: a dead letter
// nobody stores would be lost (JetStream answers "no responders" and settle keeps the original).
func (t *topology) ensureDeadLetter(ctx context.Context, js jetstream.JetStream, queue *jetstream.StreamInfo) error {
	_, err := js.StreamNameBySubject(ctx, t.dest)
	if err == nil {
		return nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("dead-letter subject %q of core.DeadLetterAfter: %w", t.dest, err)
	}
	if !t.declare {
		return &TopologyError{Kind: "dead-letter subject", Name: t.dest, Missing: true,
			Hint: "no stream captures the subject of core.DeadLetterAfter, so dead letters would be lost: create one, or turn natsjs.DeclareTopology(true) on"}
	}
	sc := jetstream.StreamConfig{
		Name:      nameOf(t.dest),
		Subjects:  []string{t.dest},
		Retention: jetstream.WorkQueuePolicy,
		Storage:   queue.Config.Storage,
		Replicas:  queue.Config.Replicas,
	}
	if _, err := js.CreateStream(ctx, sc); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return fmt.Errorf("declare dead-letter stream %q capturing %q: %w", sc.Name, t.dest, err)
	}
	return nil
}

// allCoveredBy reports whether every subject of the stream falls under pattern (then a consumer
// without a filter sees exactly the queue's messages).
func allCoveredBy(subjects []string, pattern string) bool {
	for _, s := range subjects {
		if !covers(pattern, s) {
			return false
		}
	}
	return len(subjects) > 0
}

func formatFilters(f []string) string {
	if len(f) == 0 {
		return ""
	}
	return fmt.Sprintf(" (filter_subjects %v)", slices.Clone(f))
}

// leaseOf is the lease a consumer gives a delivery: its AckWait, or the server's default.
func leaseOf(ci *jetstream.ConsumerInfo) time.Duration {
	if ci != nil && ci.Config.AckWait > 0 {
		return ci.Config.AckWait
	}
	return DefaultAckWait
}
