package asyncapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/settlehq/settle/asyncapi"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/coretest"
)

// Payout is a payout request.
type Payout struct {
	Ref   string `json:"ref"`
	Cents int64  `json:"cents"`
}

// The document of an App with one subscription and its dead letter: a channel per queue, the
// receive operation of the subscription and the send operation of its dead letter.
func Example() {
	app := core.New(core.WithInfo("payouts", "1.2.0"), core.WithDescription("Pays merchants out."))
	queues := coretest.NewBroker(nil, nil)
	pay := func(context.Context, *core.Message[Payout]) error { return nil }
	if err := core.Subscribe(app, queues.Queue("payouts"), pay, core.DeadLetterAfter(5, "payouts.dead")); err != nil {
		panic(err)
	}
	doc, err := asyncapi.New(app)
	if err != nil {
		panic(err)
	}
	raw, err := doc.JSON()
	if err != nil {
		panic(err)
	}
	var d struct {
		Channels   map[string]struct{ Address string }
		Operations map[string]struct {
			Action string
			Cap    int `json:"x-settle-cap"`
		}
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		panic(err)
	}
	for _, k := range slices.Sorted(maps.Keys(d.Channels)) {
		fmt.Println("channel", k, "address", d.Channels[k].Address)
	}
	for _, k := range []string{"receive_payouts", "deadLetter_payouts"} {
		fmt.Println("operation", k, d.Operations[k].Action, "cap", d.Operations[k].Cap)
	}
	// Output:
	// channel payouts address payouts
	// channel payouts_dead address payouts.dead
	// operation receive_payouts receive cap 5
	// operation deadLetter_payouts send cap 0
}
