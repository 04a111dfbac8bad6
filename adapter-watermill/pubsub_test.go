package settlewatermill_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	settlewatermill "github.com/settlehq/settle/adapter-watermill"
	"github.com/settlehq/settle/core"
)

// The universal suite of Watermill (pubsub/tests) runs on every backend: the same suite every
// Watermill Pub/Sub must pass. Each backend declares the Features it really has; the suite skips
// the tests of the others (the module README lists them with the reasons).
//
// The suite runs with its full message counts (5,000 and 10,000-message tests, 50 competing
// subscribers) except where a backend form cannot take them on a shared server (rowLockShort,
// advisoryShort) or in CI's time (SQLite's advisory form). SETTLE_WATERMILL_SUITE=short runs
// every backend with Features.ForceShort, the suite's own knob for slow Pub/Subs, which keeps
// every test and runs it with smaller counts; SETTLE_WATERMILL_SUITE=full runs every backend
// with the full counts (the row-lock and advisory forms then need a pool, and a server, of 70+
// connections).

// features are the Features every settle backend has: consumer groups through fan-out Topics,
// at-least-once delivery (a lease can lapse, a channel can close before its ack reaches the
// broker: never exactly once), order with one subscriber (claims by id, FIFO queues; the
// suite's order tests run without retries, which can move a message back), persistence.
func features(short bool) tests.Features {
	return tests.Features{
		ConsumerGroups:                      true,
		ExactlyOnceDelivery:                 false,
		GuaranteedOrder:                     true,
		GuaranteedOrderWithSingleSubscriber: true,
		Persistent:                          true,
		ForceShort:                          forceShort(short),
		GenerateTopicFunc: func(tctx tests.TestContext) string {
			// RabbitMQ and SQL names stay short: the suite's default is "topic-<uuid>".
			return "wm-" + strings.ReplaceAll(string(tctx.TestID), "-", "")[:20]
		},
	}
}

// forceShort is the suite's ForceShort for a backend that asks for short (or not), under
// SETTLE_WATERMILL_SUITE.
func forceShort(short bool) bool {
	switch os.Getenv("SETTLE_WATERMILL_SUITE") {
	case "short":
		return true
	case "full":
		return false
	}
	return short
}

// suiteLogger keeps the suite's output to errors: every abandon at a subscriber's close is
// logged as a warning by design.
func suiteLogger() *slog.Logger {
	level := slog.LevelError
	if os.Getenv("SETTLE_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// rowLockShort is why the row-lock forms run the suite with Features.ForceShort: a row-lock
// subscription holds a pool connection (its claim transaction) for as long as a message it
// handed out is not settled, and the full suite runs 50 competing subscribers beside 20
// one-topic subscriptions and 50 publishing goroutines. Those need more connections than a
// shared test server gives one test (with fewer, a subscriber holding a connection waits for a
// consumer who waits for a connection to publish); ForceShort runs the same tests with 10.
const rowLockShort = true

// advisoryShort is why the advisory forms run the suite with Features.ForceShort: an advisory
// subscription keeps a dedicated connection per worker for as long as it runs, and the dialects
// refuse one whose connections would leave the pool none to claim with; the full suite's 50
// competing subscribers beside 20 one-topic subscriptions would need a pool of 70 and more.
const advisoryShort = true

// runSuite runs Watermill's universal suite over queueTopics (a topic is one queue) and
// groupTopics (each consumer group a queue of its own), with subscribers mounted with mount;
// short sets Features.ForceShort.
func runSuite(t *testing.T, short bool, queueTopics, groupTopics settlewatermill.Topics, mount ...core.Option) {
	start := time.Now()
	t.Cleanup(func() { t.Logf("suite ran in %s", time.Since(start).Round(time.Millisecond)) })
	log := suiteLogger()
	newPubSub := func(t *testing.T, topics settlewatermill.Topics, opts ...settlewatermill.SubscriberOption) (message.Publisher, message.Subscriber) {
		pub, err := settlewatermill.NewPublisher(topics)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, settlewatermill.WithLogger(log), settlewatermill.Mount(mount...))
		sub, err := settlewatermill.NewSubscriber(topics, opts...)
		if err != nil {
			t.Fatal(err)
		}
		// Some of the suite's tests leave a subscriber open (TestPublishSubscribeInOrder closes
		// its multiplier before subscribing through it): close each when its test ends, so
		// that none outlives the backend it runs on.
		t.Cleanup(func() { _ = sub.Close() })
		return pub, sub
	}
	tests.TestPubSub(t, features(short),
		func(t *testing.T) (message.Publisher, message.Subscriber) { return newPubSub(t, queueTopics) },
		func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
			return newPubSub(t, groupTopics, settlewatermill.ConsumerGroup(group))
		})
}

// suffix returns a random name suffix, so that tests running at once on one server never share
// a table or a queue.
func suffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// recordingTopics remembers the topics and queues a suite used, for the cleanup.
type recordingTopics struct {
	settlewatermill.Topics
	mu     sync.Mutex
	topics map[string]bool
	queues map[string]bool
}

func record(t settlewatermill.Topics) *recordingTopics {
	return &recordingTopics{Topics: t, topics: map[string]bool{}, queues: map[string]bool{}}
}

func (r *recordingTopics) Endpoint(ctx context.Context, topic, group string) (core.Endpoint, error) {
	ep, err := r.Topics.Endpoint(ctx, topic, group)
	r.mu.Lock()
	r.topics[topic] = true
	if ep != nil {
		r.queues[ep.Queue()] = true
	}
	r.mu.Unlock()
	return ep, err
}

func (r *recordingTopics) Publish(ctx context.Context, topic string, msgs []*message.Message) error {
	r.mu.Lock()
	r.topics[topic] = true
	r.mu.Unlock()
	return r.Topics.Publish(ctx, topic, msgs)
}

func (r *recordingTopics) used() (topics, queues []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.topics {
		topics = append(topics, k)
	}
	for k := range r.queues {
		queues = append(queues, k)
	}
	return topics, queues
}
