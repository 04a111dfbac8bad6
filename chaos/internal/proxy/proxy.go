// Package proxy is a TCP proxy on loopback whose connections the chaos suite cuts: Cut closes
// every proxied connection at once, on both sides, as a network failure would.
package proxy

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// Proxy forwards connections from its listener to a target address.
type Proxy struct {
	target string
	l      net.Listener

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// Listen starts a proxy on listen (a loopback host:port) to target.
func Listen(listen, target string) (*Proxy, error) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("proxy %s -> %s: %w", listen, target, err)
	}
	p := &Proxy{target: target, l: l, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listening address.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Cut closes every open connection (both sides) and returns how many client connections it
// cut. New connections are accepted as before.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns) / 2
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, not an orderly close
		}
		c.Close()
	}
	return n
}

// Close stops accepting, cuts every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	err := p.l.Close()
	p.Cut()
	p.wg.Wait()
	return err
}
