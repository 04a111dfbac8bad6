package natsjs

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// What settle can learn about how a server writes JetStream to disk, and the warning a
// subscription logs at start when its stream has one replica on a server that does not sync
// every write.
//
// A client sees the server's version in the INFO the server sends on connect: before 2.10,
// nats-server writes JetStream data in the background and has no setting to sync each write
// (sync_interval: always arrived in 2.10). From 2.10 on only the server's configuration says
// it, and a client reads that only through the system account's VARZ request
// ($SYS.REQ.SERVER.<id>.VARZ, its jetstream.config.sync_always): it answers a connection of the
// system account, or of an account that imports the request; any other gets "no responders" at
// once, and settle cannot tell.

// serverSync is what settle learnt of a server's JetStream disk writes.
type serverSync struct {
	version  string        // the server's version, from its INFO
	known    bool          // whether settle could tell
	always   bool          // every write synced (sync_interval: always); only when known
	interval time.Duration // the background sync's interval (VARZ), 0 when not read
	source   string        // where settle read it: "server version", "VARZ"
}

// varzSync is the part of a VARZ answer settle reads.
type varzSync struct {
	Data struct {
		JetStream struct {
			Config *struct {
				SyncInterval time.Duration `json:"sync_interval"`
				SyncAlways   bool          `json:"sync_always"`
			} `json:"config"`
		} `json:"jetstream"`
	} `json:"data"`
}

// before210 reports whether a server version ("2.9.10", "v2.10.0-beta") is older than 2.10.
func before210(version string) bool {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	return err1 == nil && err2 == nil && (major < 2 || major == 2 && minor < 10)
}

// syncOf learns how the server nc is connected to writes JetStream to disk, asking VARZ for at
// most timeout.
func syncOf(ctx context.Context, nc *nats.Conn, timeout time.Duration) serverSync {
	s := serverSync{version: nc.ConnectedServerVersion()}
	if before210(s.version) {
		s.known, s.source = true, "server version"
		return s
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m, err := nc.RequestWithContext(ctx, "$SYS.REQ.SERVER."+nc.ConnectedServerId()+".VARZ", nil)
	if err != nil {
		return s
	}
	var v varzSync
	if json.Unmarshal(m.Data, &v) != nil || v.Data.JetStream.Config == nil {
		return s
	}
	cfg := v.Data.JetStream.Config
	s.known, s.always, s.interval, s.source = true, cfg.SyncAlways, cfg.SyncInterval, "VARZ"
	return s
}

// warnDurability logs, once at the subscription's start, when the queue's stream is a file
// stream with one replica on a server that does not sync every write: at warn level when settle
// could tell, at info level when it could not (a 2.10+ server whose VARZ it may not read).
func (c *consumer) warnDurability(ctx context.Context, si *jetstream.StreamInfo) {
	if si == nil || si.Config.Replicas > 1 || si.Config.Storage != jetstream.FileStorage {
		return
	}
	s := syncOf(ctx, c.nc, min(c.c.timeout, time.Second))
	switch {
	case !s.known:
		c.log.Info("nats: the queue's stream has one replica, and settle cannot read whether the server syncs every write to disk (its VARZ needs the system account); unless it runs with sync_interval: always, a power loss can lose acknowledgements it confirmed and strand messages (docs/choosing.md)",
			"stream", si.Config.Name, "replicas", si.Config.Replicas, "server_version", s.version)
	case s.source == "server version":
		c.log.Warn("nats: the queue's stream has one replica on a nats-server before 2.10, which writes JetStream to disk in the background and cannot sync every write: a crash of the server, even of its process alone, can forget acknowledgements it confirmed (those messages are handled again) and strand messages below the consumer's ack floor (settle stranded); run 2.10 or later with sync_interval: always, or three replicas (docs/choosing.md)",
			"stream", si.Config.Name, "replicas", si.Config.Replicas, "server_version", s.version, "sync", "background, no setting", "read_from", s.source)
	case !s.always:
		c.log.Warn("nats: the queue's stream has one replica on a server that does not sync every write to disk: a power loss or an operating-system crash can lose what it wrote since its last sync, acknowledgements it confirmed included (handled again, or messages stranded below the consumer's ack floor: settle stranded); set sync_interval: always, or three replicas (docs/choosing.md)",
			"stream", si.Config.Name, "replicas", si.Config.Replicas, "server_version", s.version, "sync", "every "+s.interval.String(), "read_from", s.source)
	}
}
