package coretest_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/settlehq/settle/core/coretest"
)

// echo serves lines back on a loopback port until the test ends.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn) error {
	_ = c.SetDeadline(time.Now().Add(coretest.WaitTimeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_, err := bufio.NewReader(c).ReadString('\n')
	return err
}

func TestProxyCutsRefusesAndRestores(t *testing.T) {
	p := coretest.NewProxy(t, echo(t))
	dial := func() net.Conn {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	open := dial()
	if err := roundTrip(open); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Refuse()
	if err := roundTrip(dial()); err == nil {
		t.Fatal("a new connection worked while refusing")
	}
	if err := roundTrip(open); err != nil {
		t.Fatalf("an open connection broke while refusing: %v", err)
	}
	p.Cut()
	if err := roundTrip(open); err == nil {
		t.Fatal("an open connection survived the cut")
	}
	p.Restore()
	if err := roundTrip(dial()); err != nil {
		t.Fatalf("after Restore: %v", err)
	}
}
