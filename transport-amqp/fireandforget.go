package amqp

import (
	"context"
	"fmt"
	"sync"

	"github.com/rabbitmq/amqp091-go"
)

// Copies under FireAndForget.
//
// The copy goes out on the delivery's own channel and the original is acknowledged right after
// it, without waiting for the broker. So a copy the broker does not take is lost: one it returns
// unroutable (basic.return), and one it refuses (a nack: a full queue under x-overflow
// reject-publish). Neither can be undone, but neither is silent: the session's channel is in
// confirm mode, so that the broker says which copies it refused, and a goroutine per session
// reads the returns and confirmations, counts every lost copy in CopyStats.Lost and logs them
// at error level, at most one line per logEvery per subscription (with how many were not
// logged). Nothing waits for a confirmation; a copy whose channel closes before it is confirmed
// is neither counted nor logged (its fate is unknown: the documented loss window).

// unconfirmed numbers a session's FireAndForget copies as the broker does (from 1, one per
// publishing since confirm mode was set), so that a confirmation names its copy.
type unconfirmed struct {
	mu   sync.Mutex
	seq  uint64
	sent map[uint64]sentCopy
}

// sentCopy is a copy waiting for its confirmation: its message's id and attempt, and where it
// went.
type sentCopy struct {
	id, to  string
	attempt int
}

// publishCopy publishes a FireAndForget copy of the message id to exchange/key on the session's
// channel and remembers it until the broker confirms it.
func (s *session) publishCopy(ctx context.Context, exchange, key string, mandatory bool, msg amqp091.Publishing, id string, attempt int) error {
	u := &s.copies
	u.mu.Lock()
	defer u.mu.Unlock()
	// Numbered under the lock, in the order of the publishings: a publishing that fails is not
	// numbered by the client either.
	if err := s.ch.PublishWithContext(ctx, exchange, key, mandatory, false, msg); err != nil {
		return err
	}
	u.seq++
	if u.sent == nil {
		u.sent = make(map[uint64]sentCopy)
	}
	u.sent[u.seq] = sentCopy{id: id, to: exchange + "/" + key, attempt: attempt}
	return nil
}

// confirmed forgets the copy the broker confirmed as tag and returns it.
func (u *unconfirmed) confirmed(tag uint64) sentCopy {
	u.mu.Lock()
	defer u.mu.Unlock()
	c := u.sent[tag]
	delete(u.sent, tag)
	return c
}

// watchCopies counts and logs the FireAndForget copies of session s the broker returned or
// refused, until the channel closes.
func (c *consumer) watchCopies(s *session, returns <-chan amqp091.Return, confirms <-chan amqp091.Confirmation) {
	for returns != nil || confirms != nil {
		select {
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			// A returned copy is confirmed too (with an ack), right after: that forgets it. The
			// copy carries its message's attempt as its count.
			attempt, _ := retryCount(r.Headers)
			c.lostCopy("amqp: a copy was returned unroutable after its original was acknowledged (PublishWith(FireAndForget)): the message is lost",
				sentCopy{id: r.MessageId, to: r.Exchange + "/" + r.RoutingKey, attempt: attempt}, fmt.Sprintf("%d %s", r.ReplyCode, r.ReplyText))
		case cf, ok := <-confirms:
			if !ok {
				confirms = nil
				continue
			}
			sent := s.copies.confirmed(cf.DeliveryTag)
			if !cf.Ack {
				c.lostCopy("amqp: a copy was refused (nack) after its original was acknowledged (PublishWith(FireAndForget)): the message is lost",
					sent, "nack (a full queue under x-overflow reject-publish)")
			}
		}
	}
}

// lostCopy counts a lost FireAndForget copy and logs it, rate-limited.
func (c *consumer) lostCopy(msg string, sent sentCopy, reply string) {
	c.b.copies.lost.Add(1)
	if log, quiet := c.lost.allow(c.clock.Now()); log {
		c.log.Error(msg, "message_id", sent.id, "attempt", sent.attempt, "to", sent.to, "reply", reply, "not_logged_since_last", quiet)
	}
}
