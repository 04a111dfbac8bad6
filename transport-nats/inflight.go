package natsjs

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A message in hand, once per subscription (issue 19).
//
// nats-server writes a consumer's delivery state from a background flusher (at most about ten
// times a second; sync_interval does not cover it). A server killed with SIGKILL forgets the
// deliveries of its last ~100 ms: after its restart it delivers such a message again — often with
// the same NumDelivered — while this subscription still handles the first delivery, and it
// ignores, without an answer, an acknowledgement of the delivery it forgot (one for a stream
// sequence at or past its next one to deliver). Handed to a second worker, the message ran twice
// at once and both settlements were confirmed.
//
// So a subscription keeps its messages in hand by stream (name and sequence), from the fetch that
// brought them until their settlement is done (written, or for a confirmed one, answered or
// failed), and a delivery of a sequence in hand is not handed out: the newest delivery becomes
// the one the settlement goes to (the server's current one), and the handler's outcome settles
// both, once:
//
//	ack, drop, dead letter  +ACK / +TERM on the newest delivery; one sent before the duplicate
//	                        came and still unanswered is sent again on it, and the first answer
//	                        confirms the settlement (the server applies an ack of a sequence once
//	                        and answers a repeated one). A dead letter's copy is published once.
//	retry, retry after d    -NAK (with its delay) on the newest delivery: the server's current one
//	abandoned, held         -NAK on the newest delivery
//
// A delivery of a sequence whose ack or +TERM this subscription has just had answered (or, with
// UnconfirmedAcks, written) — a duplicate that waited in a fetch while the first settled — is
// answered with the same frame, not handed out. Entries leave the in-hand map with their
// settlement; the settled ones are remembered in a table of recentSettled slots (about the last
// recentSettled sequences), so both are bounded.

// recentSettled is how many acked or terminated sequences a subscription remembers.
const recentSettled = 1024

// seqKey names a message: its stream and stream sequence.
type seqKey struct {
	stream string
	seq    uint64
}

// flight is a message in hand.
type flight struct {
	d      *Delivery     // the delivery handed out (or waiting for a worker)
	latest jetstream.Msg // the newest delivery of the sequence: where the settlement goes
	dups   int
	conf   *confirmation // a confirmed settlement waiting for its answer
}

// inHand registers d, or reports that its sequence is in hand or just settled: then m is not
// handed out (see above).
func (c *consumer) inHand(d *Delivery, key seqKey, m jetstream.Msg) bool {
	c.flyMu.Lock()
	if c.flights == nil {
		c.flights = make(map[uint64]*flight)
	}
	if f, ok := c.flights[key.seq]; ok && f.d.key.stream == key.stream {
		f.latest = m
		f.dups++
		again := f.conf
		if again != nil {
			again.sent++
		}
		first := f.d.attempt
		c.flyMu.Unlock()
		c.log.Warn("nats: a message was delivered again while this subscription still has it in hand (the server forgot the first delivery, e.g. in a crash); not handed out, it is settled once with the first delivery's outcome",
			"stream", key.stream, "consumer", c.cfg.durable, "stream_seq", key.seq, "attempt", d.attempt, "first_attempt", first,
			"confirming", again != nil)
		if again != nil { // the same frame, answered to the same token: the first answer confirms it
			if err := c.publishRequest(m.Reply(), again.reply, again.body); err != nil {
				c.refused(again, err)
			}
		}
		return true
	}
	if body, ok := c.recent.get(key); ok {
		c.flyMu.Unlock()
		c.log.Warn("nats: a message this subscription has just acknowledged or terminated was delivered again; answered with the same frame, not handed out",
			"stream", key.stream, "consumer", c.cfg.durable, "stream_seq", key.seq, "attempt", d.attempt, "frame", string(body))
		if c.cfg.confirmAcks { // as a request; its answer (to token 0) is not waited for
			_ = c.publishRequest(m.Reply(), c.cf.inbox+"0", body)
		} else if string(body) == string(termFrame) {
			_ = m.Term()
		} else {
			_ = m.Ack()
		}
		return true
	}
	d.fl = flight{d: d, latest: m} // in the delivery: no allocation of its own
	c.flights[key.seq] = &d.fl
	c.flyMu.Unlock()
	return false
}

// publishRequest publishes body on subject with a reply subject (confirmed acks only).
func (c *consumer) publishRequest(subject, reply string, body []byte) error {
	return c.nc.PublishRequest(subject, reply, body)
}

// target is where d's settlement goes: the newest delivery of its sequence.
func (c *consumer) target(d *Delivery) jetstream.Msg {
	c.flyMu.Lock()
	defer c.flyMu.Unlock()
	return c.targetLocked(d)
}

func (c *consumer) targetLocked(d *Delivery) jetstream.Msg {
	if f, ok := c.flights[d.seq]; ok && f.d == d {
		return f.latest
	}
	return d.msg
}

// land takes d out of hand, its settlement done; frame is the +ACK or +TERM that settled it
// (remembered), nil for one that failed or returned the message.
func (c *consumer) land(d *Delivery, frame []byte) {
	c.flyMu.Lock()
	defer c.flyMu.Unlock()
	c.landLocked(d, frame)
}

func (c *consumer) landLocked(d *Delivery, frame []byte) {
	if f, ok := c.flights[d.seq]; ok && f.d == d {
		delete(c.flights, d.seq)
	}
	if frame != nil {
		c.recent.add(d.key, frame)
	}
}

// nak returns d with -NAK (with delay when positive) on its newest delivery and takes it out of
// hand.
func (c *consumer) nak(d *Delivery, delay time.Duration) error {
	m := c.target(d)
	var err error
	if delay > 0 {
		err = m.NakWithDelay(delay)
	} else {
		err = m.Nak()
	}
	c.land(d, nil)
	return err
}

var (
	ackFrame  = []byte("+ACK")
	termFrame = []byte("+TERM")
)

// confirmWait bounds the wait for the server's answer to an ack or a +TERM: RequestTimeout,
// at most the AckWait. A server that has the delivery answers within a round trip; one that
// forgot it (a crash) never answers that request, and past the AckWait a server that still has
// the message has delivered it again, which this subscription answers with the same frame.
func (c *consumer) confirmWait() time.Duration {
	w := c.c.timeout
	if c.lease > 0 && c.lease < w {
		w = c.lease
	}
	return w
}

// recentSet remembers the sequences acked or terminated last, with their frame: a table of
// recentSettled slots, the slot of a sequence its number modulo recentSettled, so that adding
// and looking up cost no map operation (they run once per message). Sequences come mostly in
// order, so a sequence is forgotten when one recentSettled later takes its slot: about the last
// recentSettled are remembered.
type recentSet struct {
	slots []recentSlot
}

type recentSlot struct {
	key   seqKey
	frame []byte
}

func (r *recentSet) add(k seqKey, frame []byte) {
	if r.slots == nil {
		r.slots = make([]recentSlot, recentSettled)
	}
	r.slots[k.seq%recentSettled] = recentSlot{key: k, frame: frame}
}

func (r *recentSet) get(k seqKey) ([]byte, bool) {
	if r.slots == nil {
		return nil, false
	}
	s := &r.slots[k.seq%recentSettled]
	if s.frame == nil || s.key != k {
		return nil, false
	}
	return s.frame, true
}

// len is how many sequences are remembered.
func (r *recentSet) len() int {
	n := 0
	for _, s := range r.slots {
		if s.frame != nil {
			n++
		}
	}
	return n
}
