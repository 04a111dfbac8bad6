package coretest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy is a TCP proxy on a loopback port, in front of a server, that a test uses to cut a
// backend off and bring it back without touching the server other tests share: Cut closes
// every connection through it and refuses new ones (the server looks down), Refuse refuses new
// connections only (those open keep working), Restore accepts again, and MuteServer silences
// the server on the connections open (what it sends is lost, what the client sends still
// reaches it).
type Proxy struct {
	target string
	ln     net.Listener

	mu     sync.Mutex
	mode   proxyMode
	conns  map[net.Conn]struct{}
	links  map[*atomic.Bool]struct{} // the muted flags of the open connections
	closed bool
	wg     sync.WaitGroup
}

type proxyMode uint8

const (
	proxyOpen proxyMode = iota
	proxyRefuse
)

// NewProxy listens on the first free port of ports on 127.0.0.1 (a test's own range; none
// given: any free port) and forwards every connection to target. The test's cleanup closes it.
func NewProxy(t testing.TB, target string, ports ...int) *Proxy {
	t.Helper()
	if len(ports) == 0 {
		ports = []int{0}
	}
	var errs []error
	for _, port := range ports {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p := &Proxy{target: target, ln: ln, conns: make(map[net.Conn]struct{}), links: make(map[*atomic.Bool]struct{})}
		p.wg.Add(1)
		go p.accept()
		t.Cleanup(p.Close)
		return p
	}
	t.Fatalf("coretest.NewProxy to %s: no port of %v is free: %v", target, ports, errors.Join(errs...))
	return nil
}

// Addr is the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the proxy's port.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Cut closes every connection through the proxy and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.mode = proxyRefuse
	conns := p.conns
	p.conns = make(map[net.Conn]struct{})
	p.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}

// Refuse closes every new connection at once until Restore; open ones keep working.
func (p *Proxy) Refuse() {
	p.mu.Lock()
	p.mode = proxyRefuse
	p.mu.Unlock()
}

// MuteServer drops, from now on, everything the server sends on the connections open through
// the proxy, while what their clients send still reaches it: the server acts on a request and
// its answer is lost, as when a connection dies after the server applied it. A muted
// connection stays muted until Cut or Close ends it; connections opened later are not muted.
func (p *Proxy) MuteServer() {
	p.mu.Lock()
	for m := range p.links {
		m.Store(true)
	}
	p.mu.Unlock()
}

// Restore accepts and forwards connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.mode = proxyOpen
	p.mu.Unlock()
}

// Close stops the proxy and closes every connection through it.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.mode == proxyRefuse || p.closed
		p.mu.Unlock()
		if refuse {
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

func (p *Proxy) forward(c net.Conn) {
	defer p.wg.Done()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.mode == proxyRefuse || p.closed { // cut or closed while dialling
		p.mu.Unlock()
		_ = c.Close()
		_ = s.Close()
		return
	}
	muted := new(atomic.Bool)
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	p.links[muted] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn, muted *atomic.Bool) {
		if muted == nil {
			_, _ = io.Copy(dst, src)
		} else {
			_, _ = io.Copy(dst, mutable{src, muted})
		}
		_ = dst.Close()
		_ = src.Close()
		done <- struct{}{}
	}
	go pipe(s, c, nil)
	go pipe(c, s, muted)
	<-done
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	delete(p.links, muted)
	p.mu.Unlock()
}

// mutable reads from a server connection and, once muted, drops what it read.
type mutable struct {
	r     io.Reader
	muted *atomic.Bool
}

func (m mutable) Read(b []byte) (int, error) {
	for {
		n, err := m.r.Read(b)
		if n == 0 || !m.muted.Load() {
			return n, err
		}
		if err != nil {
			return 0, err
		}
	}
}

// String names the proxy and its target, for logs.
func (p *Proxy) String() string { return fmt.Sprintf("proxy %s -> %s", p.Addr(), p.target) }
