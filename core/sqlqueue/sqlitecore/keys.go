package sqlitecore

import (
	"context"
	"fmt"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// KeyedConn is a reserved connection whose advisory keys go with it when it is discarded, as a
// server session's advisory locks go with the session (driver.AdvisoryDialect's contract).
type KeyedConn struct {
	driver.Conn
	Keys *driver.LocalKeys
}

// Discard releases the connection's keys, then discards it.
func (c *KeyedConn) Discard() error {
	c.Keys.ReleaseConn(c)
	return c.Conn.Discard()
}

// HoldKeys wraps the advisory endpoint ep of a database whose keys live in keys: while a
// subscription of it runs, the process holds the companion file's lock (driver.LocalKeys.Hold),
// and a subscription of another process on the same file is refused at start with an error (of
// package pkg) matching driver.ErrKeysHeldElsewhere.
func HoldKeys(ep core.Endpoint, keys *driver.LocalKeys, pkg string) core.Endpoint {
	return &heldEndpoint{Endpoint: ep, keys: keys, pkg: pkg}
}

// heldEndpoint holds the companion file's lock while its subscription runs.
type heldEndpoint struct {
	core.Endpoint
	keys *driver.LocalKeys
	pkg  string
}

func (e *heldEndpoint) Open(ctx context.Context, sub core.Subscription) (core.Source, core.Finisher, error) {
	release, err := e.keys.Hold()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: advisory subscription %q: %w", e.pkg, sub.Name, err)
	}
	src, fin, err := e.Endpoint.Open(ctx, sub)
	if err != nil {
		release()
		return nil, nil, err
	}
	return &heldSource{Source: src, release: release}, fin, nil
}

// heldSource gives the companion file's lock back when the subscription's source closes.
type heldSource struct {
	core.Source
	release func()
}

func (s *heldSource) Close() error {
	defer s.release()
	return s.Source.Close()
}
