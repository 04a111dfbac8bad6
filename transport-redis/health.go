package redisq

import (
	"context"

	"github.com/settlehq/settle/core"
)

var _ core.HealthChecker = (*Client)(nil)

// CheckHealth reports the server (core.HealthChecker): pass when it answers PING within ctx,
// fail when it does not (with the error) or the client is closed.
func (c *Client) CheckHealth(ctx context.Context) core.ComponentHealth {
	h := core.ComponentHealth{Name: "redis " + c.addr(), Status: core.HealthFail}
	rdb, err := c.client()
	if err != nil {
		h.State = "closed"
		return h
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		h.State, h.Output, h.ErrorAt = "unreachable", err.Error(), c.clock.Now()
		return h
	}
	h.Status, h.State = core.HealthPass, "connected"
	return h
}
