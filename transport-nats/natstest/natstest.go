// Package natstest runs real nats-servers with JetStream inside the process, for tests and
// examples that have no server to talk to: the server code of github.com/nats-io/nats-server/v2,
// not a fake, listening on loopback and storing in a directory of the caller's. The servers log
// nothing unless SETTLE_TEST_NATS_LOG is set (to "debug" for the protocol's details).
//
//	srv := natstest.New(t)                 // one server, random port, t.TempDir() storage
//	conn, _ := natsjs.New(srv.URL(), natsjs.DeclareTopology(true))
//
//	cl := natstest.NewCluster(t, []int{4240, 4241, 4242}, []int{6240, 6241, 6242})
//	conn, _ := natsjs.New(cl.URLs(), ...) // every member's URL
//	cl.StreamLeader("work").Shutdown()     // the stream's leader goes away
//
// Strand leaves a message stranded below a consumer's ack floor on any server, for tests of
// the stranded messages' detection and repair.
package natstest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is one embedded nats-server with JetStream.
type Server struct {
	srv  *server.Server
	name string
	url  string
}

// Start starts a server with JetStream storing in dir, on a free loopback port.
func Start(dir string) (*Server, error) {
	return start(&server.Options{
		ServerName: "settle-embedded",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   dir,
		NoLog:      true,
		NoSigs:     true,
	})
}

func start(o *server.Options) (*Server, error) {
	if os.Getenv("SETTLE_TEST_NATS_LOG") != "" {
		o.NoLog, o.Debug = false, os.Getenv("SETTLE_TEST_NATS_LOG") == "debug"
	}
	s, err := server.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("natstest: new server %s: %w", o.ServerName, err)
	}
	if !o.NoLog {
		s.ConfigureLogger() // to stderr
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("natstest: server %s not accepting connections within 10s", o.ServerName)
	}
	return &Server{srv: s, name: o.ServerName, url: s.ClientURL()}, nil
}

// New starts a server for the test in t.TempDir() and shuts it down when the test ends; it
// fails the test when the server does not start.
func New(t testing.TB) *Server {
	t.Helper()
	s, err := Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// URL is the server's client URL (nats://127.0.0.1:port).
func (s *Server) URL() string { return s.url }

// Name is the server's name.
func (s *Server) Name() string { return s.name }

// Server returns the nats-server itself.
func (s *Server) Server() *server.Server { return s.srv }

// Running reports whether the server has not been shut down.
func (s *Server) Running() bool { return s.srv.Running() }

// Shutdown stops the server and waits until it has stopped. It may be called more than once.
func (s *Server) Shutdown() {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}

// Cluster is a JetStream cluster of embedded servers on loopback, routed to one another.
type Cluster struct {
	Servers []*Server
}

// StartCluster starts one server per client port, each with JetStream in a directory of its own
// under dir and its cluster (route) listener on the matching cluster port, all routed to one
// another, and waits (up to 30s) until JetStream has elected its meta leader.
func StartCluster(dir string, clientPorts, clusterPorts []int) (*Cluster, error) {
	if len(clientPorts) < 3 || len(clientPorts) != len(clusterPorts) {
		return nil, fmt.Errorf("natstest: a JetStream cluster needs at least three servers, one client and one cluster port each (got %d and %d)", len(clientPorts), len(clusterPorts))
	}
	routes := make([]*url.URL, len(clusterPorts))
	for i, p := range clusterPorts {
		routes[i] = &url.URL{Scheme: "nats-route", Host: "127.0.0.1:" + strconv.Itoa(p)}
	}
	c := &Cluster{}
	for i := range clientPorts {
		name := "settle-n" + strconv.Itoa(i+1)
		s, err := start(&server.Options{
			ServerName: name,
			Host:       "127.0.0.1",
			Port:       clientPorts[i],
			JetStream:  true,
			StoreDir:   filepath.Join(dir, name),
			NoLog:      true,
			NoSigs:     true,
			Cluster:    server.ClusterOpts{Name: "settle-test", Host: "127.0.0.1", Port: clusterPorts[i]},
			Routes:     routes,
		})
		if err != nil {
			c.Shutdown()
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.waitFor(ctx, func() bool { return c.metaLeader() != nil }); err != nil {
		c.Shutdown()
		return nil, fmt.Errorf("natstest: no JetStream meta leader elected: %w", err)
	}
	return c, nil
}

// NewCluster starts a cluster for the test in t.TempDir() and shuts it down when the test ends.
func NewCluster(t testing.TB, clientPorts, clusterPorts []int) *Cluster {
	t.Helper()
	c, err := StartCluster(t.TempDir(), clientPorts, clusterPorts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)
	return c
}

// URLs lists every member's client URL, separated by commas (as natsjs.New takes them).
func (c *Cluster) URLs() string {
	u := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		u[i] = s.URL()
	}
	return strings.Join(u, ",")
}

// StreamLeader returns the running server that leads stream (global account), or nil.
func (c *Cluster) StreamLeader(stream string) *Server {
	for _, s := range c.Servers {
		if s.Running() && s.srv.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return s
		}
	}
	return nil
}

// WaitStreamLeader waits until a running server leads stream, and returns it.
func (c *Cluster) WaitStreamLeader(ctx context.Context, stream string) (*Server, error) {
	var l *Server
	err := c.waitFor(ctx, func() bool { l = c.StreamLeader(stream); return l != nil })
	if err != nil {
		return nil, fmt.Errorf("natstest: stream %q has no leader: %w", stream, err)
	}
	return l, nil
}

func (c *Cluster) metaLeader() *Server {
	for _, s := range c.Servers {
		if s.Running() && s.srv.JetStreamIsLeader() {
			return s
		}
	}
	return nil
}

// waitFor checks cond every 20ms until it holds or ctx ends. The servers announce elections on
// no channel an embedding process can wait on, so their state is sampled.
func (c *Cluster) waitFor(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), errors.New("condition never held"))
		case <-t.C:
		}
	}
	return nil
}

// Shutdown stops every running server.
func (c *Cluster) Shutdown() {
	for _, s := range c.Servers {
		s.Shutdown()
	}
}
