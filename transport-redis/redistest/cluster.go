package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of masters only, each a Server of its own on loopback.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts n masters (n >= 1) in subfolders of dir, splits the 16,384 hash slots
// between them, joins them (CLUSTER MEET) and waits until every node reports the cluster ok.
func StartCluster(dir string, n int) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("redistest.StartCluster: %d nodes", n)
	}
	c := &Cluster{}
	for i := range n {
		sub := filepath.Join(dir, "node"+strconv.Itoa(i))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			c.Stop()
			return nil, err
		}
		s, err := start(sub, "everysec", "cluster-enabled yes\ncluster-config-file nodes.conf\ncluster-node-timeout 5000\n")
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	if err := c.form(); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) form() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const slots = 16384
	clients := make([]*redis.Client, len(c.Nodes))
	for i, s := range c.Nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: s.Addr()})
		defer clients[i].Close()
		lo, hi := i*slots/len(c.Nodes), (i+1)*slots/len(c.Nodes)-1
		if err := clients[i].Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return fmt.Errorf("redistest: CLUSTER ADDSLOTSRANGE %d %d on %s: %w", lo, hi, s.Addr(), err)
		}
		if i > 0 {
			if err := clients[0].ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(s.port)).Err(); err != nil {
				return fmt.Errorf("redistest: CLUSTER MEET %s: %w", s.Addr(), err)
			}
		}
	}
	for { // polling: a cluster gives no signal when it has converged
		ok := true
		for _, cl := range clients {
			info, err := cl.ClusterInfo(ctx).Result()
			if err != nil {
				return fmt.Errorf("redistest: CLUSTER INFO: %w", err)
			}
			ok = ok && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(c.Nodes))+"\r")
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: the cluster of %d nodes did not converge: %w", len(c.Nodes), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// URL is the cluster's go-redis cluster URL, every node a seed.
func (c *Cluster) URL() string {
	u := "redis://" + c.Nodes[0].Addr()
	for i, s := range c.Nodes[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + s.Addr()
	}
	return u
}

// Stop kills every node.
func (c *Cluster) Stop() {
	for _, s := range c.Nodes {
		s.Stop()
	}
}
