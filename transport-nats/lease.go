package natsjs

import "time"

// The lease of a delivery is the consumer's AckWait. Every delivery handed out and not yet
// settled is on the consumer's lease list, and a loop on the App's clock sends +WPI (in
// progress) for each of them every third of the AckWait, so that the server does not redeliver
// a message whose handler is still working. Before each round the loop also takes the messages
// of the current fetch that wait for a free worker onto the list (takeWaiting): they arrived
// after the last round, so the +WPI reaches them within a third of their AckWait.

func (c *consumer) track(d *Delivery) {
	c.leaseMu.Lock()
	d.next = c.head
	if c.head != nil {
		c.head.prev = d
	}
	c.head, d.listed = d, true
	c.leaseMu.Unlock()
}

// untrack takes d off the lease list; it is settled (or about to be).
func (c *consumer) untrack(d *Delivery) {
	c.leaseMu.Lock()
	c.untrackLocked(d)
	c.leaseMu.Unlock()
}

func (c *consumer) untrackLocked(d *Delivery) {
	if !d.listed {
		return
	}
	if d.prev != nil {
		d.prev.next = d.next
	} else {
		c.head = d.next
	}
	if d.next != nil {
		d.next.prev = d.prev
	}
	d.prev, d.next, d.listed = nil, nil, false
}

// extendEvery is the period of the +WPI loop for a lease.
func extendEvery(lease time.Duration) time.Duration { return max(lease/3, 100*time.Millisecond) }

// extend runs until Close, extending the lease of every tracked delivery each period.
func (c *consumer) extend() {
	defer c.loop.Done()
	every := extendEvery(c.lease)
	t := c.clock.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C():
		}
		c.takeWaiting()
		n, failed := 0, 0
		var firstErr error
		c.leaseMu.Lock()
		for d := c.head; d != nil; d = d.next {
			n++
			if err := d.msg.InProgress(); err != nil {
				failed++
				if firstErr == nil {
					firstErr = err
				}
			}
		}
		c.leaseMu.Unlock()
		if failed > 0 {
			c.log.Warn("nats: extending leases (+WPI) failed; those messages are redelivered once their AckWait runs out",
				"stream", c.cfg.stream, "consumer", c.cfg.durable, "deliveries", n, "failed", failed, "error", firstErr)
		}
		t.Reset(every)
	}
}
