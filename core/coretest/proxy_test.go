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

// heard serves a loopback port that reports every line it receives and answers it; the test's
// cleanup closes it.
func heard(t *testing.T) (string, <-chan string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan string, 16)
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
					got <- line
				}
			}()
		}
	}()
	return ln.Addr().String(), got
}

// A muted connection still carries the client's bytes to the server, and loses the server's
// answer; a connection opened after the mute works.
func TestProxyMuteServerLosesTheAnswer(t *testing.T) {
	addr, got := heard(t)
	p := coretest.NewProxy(t, addr)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(c); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	<-got
	p.MuteServer()
	if _, err := c.Write([]byte("applied\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case line := <-got: // answered by the server, written back
		if line != "applied\n" {
			t.Fatalf("the server heard %q", line)
		}
	case <-time.After(coretest.WaitTimeout):
		t.Fatal("the client's bytes did not reach the server after the mute")
	}
	// The answer was written before the server reported the line; a second exchange through a
	// fresh connection, answered after it, shows the proxy forwards in order meanwhile.
	fresh, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := roundTrip(fresh); err != nil {
		t.Fatalf("a connection opened after the mute: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := c.Read(make([]byte, 64)); n > 0 || err == nil {
		t.Fatalf("the muted connection received %d bytes (err %v)", n, err)
	}
	p.Cut()
}
