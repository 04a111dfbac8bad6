package amqp

import "github.com/settlehq/settle/core"

// Suspect deliveries first.
//
// A message that a crash returned to its queue (a suspect delivery: Delivery.Suspect) may
// arrive in a consumer whose full window is open, behind clean deliveries already prefetched —
// another consumer of the queue died, or the restarted consumer's first clean delivery opened
// its window before every returned message had come back. Until it is handed to a handler it
// waits in the window, and on a quorum queue a crash of this consumer meanwhile charges it a
// second delivery no handler saw. So Next takes what has arrived without waiting (up to
// maxHeld deliveries) and hands out a suspect delivery ahead of the clean ones received before
// it: it then waits only for the handlers already running (core runs a suspect delivery with no
// other handler beside it), not for the whole window's worth of handlers. Clean deliveries keep
// their order; suspect ones keep theirs. The window is not narrowed, so a crash of another
// handler while the suspect waits for it still charges it: each crash charges a message at most
// once.

// maxHeld bounds the deliveries Next takes ahead of the handlers (a classic queue's window has
// no limit by default; its deliveries wait in the client otherwise).
const maxHeld = 512

// held is the queue of deliveries received and not handed out yet. Only Next uses it (core
// calls Next one at a time).
type held struct {
	buf      []core.Delivery
	head     int
	suspects int // suspect deliveries in buf[head:]
}

func (q *held) len() int { return len(q.buf) - q.head }

func (q *held) push(d core.Delivery) {
	if q.head > 0 && q.head >= len(q.buf)/2 {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, d)
	if base(d).suspect {
		q.suspects++
	}
}

// reset forgets every delivery held.
func (q *held) reset() {
	clear(q.buf)
	*q = held{buf: q.buf[:0]}
}

// pop takes the first suspect delivery if there is one, otherwise the oldest; nil when empty.
func (q *held) pop() core.Delivery {
	if q.head == len(q.buf) {
		return nil
	}
	i := q.head
	if q.suspects > 0 {
		for j := q.head; j < len(q.buf); j++ {
			if base(q.buf[j]).suspect {
				i = j
				break
			}
		}
		q.suspects--
	}
	d := q.buf[i]
	copy(q.buf[q.head+1:i+1], q.buf[q.head:i]) // the ones before it move up one, in order
	q.buf[q.head] = nil
	q.head++
	return d
}
