package settleotel_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/coretest"
	settleotel "github.com/settlehq/settle/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// An App instrumented with settleotel: one span per delivery, ended when its settlement is
// durable. The in-memory broker stands in for a real backend.
func Example() {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	tel, err := settleotel.New(settleotel.WithTracerProvider(tp))
	if err != nil {
		panic(err)
	}
	clk := clock.NewVirtual(coretest.Epoch)
	broker := coretest.NewBroker(clk, nil)
	done := make(chan struct{})
	app := core.New(append(tel.AppOptions(), core.WithClock(clk), core.WithoutSignals(),
		core.WithLogger(slog.New(slog.DiscardHandler)),
		core.WithObserver(func(core.Settlement) { close(done) }))...)
	app.Register(broker)
	type Refund struct{ ID string }
	err = core.Subscribe(app, broker.Queue("refunds"), func(ctx context.Context, m *core.Message[Refund]) error {
		return core.RetryAfter(30e9) // 30 s
	}, core.DeadLetterAfter(1, "refunds.dead"))
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error)
	go func() { ran <- app.Run(ctx) }()
	broker.Publish("refunds", []byte(`{"ID":"r-1"}`), nil)
	<-done
	stop()
	<-ran

	s := spans.GetSpans()[0]
	fmt.Println(s.Name, s.SpanKind, s.Status.Code)
	for _, a := range s.Attributes {
		switch a.Key {
		case "messaging.system", "messaging.destination.name", "settle.attempt", "settle.handler", "settle.outcome", "settle.result":
			fmt.Printf("  %s=%s\n", a.Key, a.Value.String())
		}
	}
	// Output:
	// process refunds consumer Error
	//   messaging.system=memory
	//   messaging.destination.name=refunds
	//   settle.attempt=1
	//   settle.handler=retry_after
	//   settle.outcome=dead_letter
	//   settle.result=settled
}
