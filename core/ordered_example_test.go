package core_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
)

// An SMS sender that must send each customer's texts in order: published with the customer as
// ordering key and handled by an ordered subscription, a customer's texts run one at a time, in
// publish order, even with four workers and a failure — the retried first text holds its key,
// and the customer's later texts wait for it. Different customers run in parallel.
func ExampleOrdered() {
	queues := coretest.NewBroker(clock.Real(), nil)
	settled := make(chan core.Settlement, 16)
	app := core.New(core.WithLogger(slog.New(slog.DiscardHandler)), core.WithoutSignals(),
		core.WithObserver(func(s core.Settlement) { settled <- s }))
	app.Register(queues)

	var mu sync.Mutex
	sent := map[string][]string{} // customer → texts, in the order the handler ran them
	send := func(ctx context.Context, m *core.Message[string]) error {
		customer := core.OrderingKeyOf(m.Delivery())
		mu.Lock()
		sent[customer] = append(sent[customer], fmt.Sprintf("%s@%d", m.Payload, m.Attempt()))
		mu.Unlock()
		if m.Payload == "welcome" && m.Attempt() == 1 {
			return core.Retry() // the SMS gateway was busy
		}
		return nil
	}
	if err := core.Subscribe(app, queues.Queue("sms"), send, core.Ordered(), core.Workers(4),
		core.WithCodec(core.Raw)); err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error)
	go func() { done <- app.Run(ctx) }()
	<-app.Ready()

	pub, _ := core.NewPublisher[string](queues.Queue("sms"), core.PublishCodec(core.Raw))
	for _, text := range []struct{ customer, body string }{
		{"cust-1", "welcome"}, {"cust-2", "welcome"}, {"cust-1", "code 1234"},
		{"cust-2", "code 9876"}, {"cust-1", "goodbye"},
	} {
		if _, err := pub.Publish(ctx, text.body, core.OrderingKey(text.customer)); err != nil {
			fmt.Println(err)
			return
		}
	}
	for range 7 { // five texts, two of them retried once
		<-settled
	}
	stop()
	<-done
	for _, c := range slices.Sorted(maps.Keys(sent)) {
		fmt.Printf("%s: %s\n", c, strings.Join(sent[c], ", "))
	}
	// Output:
	// cust-1: welcome@1, welcome@2, code 1234@1, goodbye@1
	// cust-2: welcome@1, welcome@2, code 9876@1
}
