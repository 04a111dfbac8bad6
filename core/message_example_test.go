package core_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/settlehq/settle/core"
)

// handlerTestDelivery is the least a handler's unit test needs: an id and an attempt.
type handlerTestDelivery struct{ attempt int }

func (d handlerTestDelivery) ID() string                 { return "r-1" }
func (d handlerTestDelivery) Attempt() int               { return d.attempt }
func (d handlerTestDelivery) Body() []byte               { return nil }
func (d handlerTestDelivery) Headers() map[string]string { return nil }

// A handler is a plain function: NewMessage builds the message it receives, so a unit test can
// call it directly, at any attempt, and check the outcome it returns.
func ExampleNewMessage() {
	refund := func(ctx context.Context, m *core.Message[string]) error {
		if m.Attempt() < 3 {
			return core.Retry().Because(errors.New("card processor timeout"))
		}
		return nil
	}
	for attempt := 1; attempt <= 3; attempt++ {
		err := refund(context.Background(), core.NewMessage[string](handlerTestDelivery{attempt}, "card 4000"))
		if o, ok := core.AsOutcome(err); ok {
			fmt.Printf("attempt %d: %v\n", attempt, o.Kind())
		} else {
			fmt.Printf("attempt %d: ack=%v\n", attempt, err == nil)
		}
	}
	// Output:
	// attempt 1: retry
	// attempt 2: retry
	// attempt 3: ack=true
}
