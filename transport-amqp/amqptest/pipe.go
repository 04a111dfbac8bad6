package amqptest

import "sync"

// pipe forwards values to a receiver through an unbounded FIFO, so that the broker never waits
// for a slow reader (amqp091-go buffers deliveries the same way). It owns one goroutine, which
// stops when stop is called: with flush it first hands over what is queued, otherwise it drops
// it; either way it then closes out.
type pipe[T any] struct {
	mu      sync.Mutex
	q       []T
	wake    chan struct{}
	done    chan struct{}
	flush   bool
	stopped bool
	drained bool // stopped by drain: flushing, until a stop aborts it
	aborted bool
	abort   chan struct{} // closed by a stop after drain
	sending bool          // run holds a value it is handing over
	out     chan T
}

func newPipe[T any](out chan T, flush bool) *pipe[T] {
	p := &pipe[T]{wake: make(chan struct{}, 1), done: make(chan struct{}), abort: make(chan struct{}), out: out, flush: flush}
	go p.run()
	return p
}

func (p *pipe[T]) push(v T) {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.q = append(p.q, v)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// pushNow hands v to the receiver at once when nothing is queued ahead of it and the receiver
// has room, as amqp091-go's reader hands a value to a buffered listener before it reads the
// next frame; otherwise it queues v like push.
func (p *pipe[T]) pushNow(v T) {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	if len(p.q) == 0 && !p.sending {
		select {
		case p.out <- v:
			p.mu.Unlock()
			return
		default:
		}
	}
	p.mu.Unlock()
	p.push(v)
}

func (p *pipe[T]) stop() {
	p.mu.Lock()
	if !p.stopped {
		p.stopped = true
		close(p.done)
	} else if p.drained && !p.aborted {
		// Stopped for good (its channel closed) while draining: the rest is dropped.
		p.aborted = true
		close(p.abort)
	}
	p.mu.Unlock()
}

// drain stops p after it has handed out what is queued, as amqp091-go hands a cancelled
// consumer the deliveries sent before basic.cancel-ok and then closes its channel.
func (p *pipe[T]) drain() {
	p.mu.Lock()
	if !p.stopped {
		p.stopped = true
		p.flush = true
		p.drained = true
		close(p.done)
	}
	p.mu.Unlock()
}

func (p *pipe[T]) next() (T, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var zero T
	if len(p.q) == 0 {
		return zero, false
	}
	v := p.q[0]
	p.q[0] = zero
	p.q = p.q[1:]
	p.sending = true
	return v, true
}

func (p *pipe[T]) sent() {
	p.mu.Lock()
	p.sending = false
	p.mu.Unlock()
}

func (p *pipe[T]) run() {
	defer close(p.out)
	for {
		v, ok := p.next()
		if !ok {
			select {
			case <-p.wake:
				continue
			case <-p.done:
				if p.flush {
					for {
						v, ok := p.next()
						if !ok {
							return
						}
						select {
						case p.out <- v:
						case <-p.abort:
							return
						}
					}
				}
				return
			}
		}
		select {
		case p.out <- v:
			p.sent()
		case <-p.done:
			if !p.flush {
				return
			}
			select {
			case p.out <- v:
			case <-p.abort:
				return
			}
			for {
				v, ok := p.next()
				if !ok {
					return
				}
				select {
				case p.out <- v:
				case <-p.abort:
					return
				}
			}
		}
	}
}
