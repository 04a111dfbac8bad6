package redisq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

// Client is one Redis client (a pool of connections) shared by a service's subscriptions. It
// is a core.Backend: register it with the App, which checks the server at start (core.Starter)
// and closes it after the subscriptions have stopped.
type Client struct {
	url   string
	log   *slog.Logger
	clock clock.Clock
	rdb   redis.UniversalClient
	where string // the server's address (the seeds' on a cluster), without credentials

	cluster bool

	mu     sync.Mutex
	closed bool
}

var (
	_ core.Backend = (*Client)(nil)
	_ core.Starter = (*Client)(nil)
)

// Option configures a Client.
type Option func(*Client) error

// WithLogger sets the logger of the client's own events (default slog.Default()). Subscriptions
// log through the App's logger.
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) error {
		if l == nil {
			return errors.New("redisq.WithLogger(nil): no logger")
		}
		c.log = l
		return nil
	}
}

// WithClock sets the clock of what runs outside a subscription (default: real). Subscriptions
// use the App's clock.
func WithClock(k clock.Clock) Option {
	return func(c *Client) error {
		if k == nil {
			return errors.New("redisq.WithClock(nil): no clock")
		}
		c.clock = k
		return nil
	}
}

// Cluster makes Open connect to a Redis Cluster: the URL names one or more seed nodes
// ("redis://host1:7000?addr=host2:7001&addr=host3:7002", go-redis's cluster URL). Every key a
// queue's scripts use together must hash to one slot: see NewQueue.
func Cluster() Option {
	return func(c *Client) error { c.cluster = true; return nil }
}

// Open returns a Client for the Redis server at url ("redis://[user:password@]host:6379/0",
// "rediss://" for TLS; the query may set go-redis pool options), or for a Redis Cluster with
// Cluster(). It does not connect yet: the App's start does, or the first command.
func Open(url string, opts ...Option) (*Client, error) {
	if strings.TrimSpace(url) == "" {
		return nil, errors.New("redisq.Open: the server URL is empty")
	}
	c := &Client{url: url, log: slog.Default(), clock: clock.Real()}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("redisq.Open: nil option")
		}
		if err := o(c); err != nil {
			return nil, err
		}
	}
	if c.cluster {
		co, err := redis.ParseClusterURL(url)
		if err != nil {
			return nil, fmt.Errorf("redisq.Open: %w", err)
		}
		c.rdb, c.where = redis.NewClusterClient(co), "cluster "+strings.Join(co.Addrs, ",")
		return c, nil
	}
	ro, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redisq.Open: %w", err)
	}
	c.rdb, c.where = redis.NewClient(ro), ro.Addr
	return c, nil
}

// Start checks that the server answers and is Redis 7.0 or later (XAUTOCLAIM with the deleted
// entries it reports); the App calls it before subscriptions open.
func (c *Client) Start(ctx context.Context) error {
	rdb, err := c.client()
	if err != nil {
		return err
	}
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return fmt.Errorf("redisq: reach Redis at %s: %w", c.addr(), err)
	}
	v := infoField(info, "redis_version")
	major, _ := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
	if major < 7 {
		return fmt.Errorf("redisq: Redis at %s is version %q; settle needs 7.0 or later (XAUTOCLAIM)", c.addr(), v)
	}
	return nil
}

// Close closes the client's connections. Entries read and not settled stay in their groups'
// pending lists and are claimed again once their lease has run out.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return c.rdb.Close()
}

// Redis returns the underlying go-redis client: a *redis.Client, or a *redis.ClusterClient with
// Cluster().
func (c *Client) Redis() redis.UniversalClient { return c.rdb }

func (c *Client) client() (redis.UniversalClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, core.ErrClosed
	}
	return c.rdb, nil
}

// addr is the server's address for logs and errors, without credentials.
func (c *Client) addr() string { return c.where }

// infoField reads one "name:value" line of an INFO reply.
func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
