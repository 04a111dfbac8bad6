package amqp

import "github.com/settlehq/settle/core"

// CloseChannel closes the channel d was delivered on, as a channel-level fault would.
func CloseChannel(d core.Delivery) error { return base(d).s.ch.Close() }

// Epoch is the epoch of the channel d was delivered on.
func Epoch(d core.Delivery) uint64 { return base(d).s.epoch }
