package amqp

import (
	"github.com/rabbitmq/amqp091-go"
	"time"

	"github.com/settlehq/settle/core"
)

// CloseChannel closes the channel d was delivered on, as a channel-level fault would.
func CloseChannel(d core.Delivery) error { return base(d).s.ch.Close() }

// Epoch is the epoch of the channel d was delivered on.
func Epoch(d core.Delivery) uint64 { return base(d).s.epoch }

// SetFlushInterval sets the acknowledgement flush window and returns a func that restores it.
// Only sequential tests may call it (parallel tests read the window).
func SetFlushInterval(d time.Duration) (restore func()) {
	old := flushInterval
	flushInterval = d
	return func() { flushInterval = old }
}

// QueueArguments reads an existing queue's arguments without declaring (queueArguments).
func QueueArguments(b *Broker, name string, durable bool) (amqp091.Table, error) {
	return queueArguments(b.channel, name, durable, false)
}
