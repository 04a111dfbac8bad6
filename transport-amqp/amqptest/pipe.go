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
	sending bool // run holds a value it is handing over
	out     chan T
}

func newPipe[T any](out chan T, flush bool) *pipe[T] {
	p := &pipe[T]{wake: make(chan struct{}, 1), done: make(chan struct{}), out: out, flush: flush}
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
			p.out <- v
			for {
				v, ok := p.next()
				if !ok {
					return
				}
				p.out <- v
			}
		}
	}
}
