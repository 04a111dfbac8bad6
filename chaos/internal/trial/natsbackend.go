package trial

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/chaos"
	"github.com/settlehq/settle/chaos/internal/servers"
)

// natsBackend is a queue (a work-queue stream and its durable consumer, declared by the
// workers) and its dead-letter stream on the suite's own nats-server: the one it builds (2.15,
// sync_interval: always), or with legacy a nats-server before 2.10 writing in the background
// (the strand trial, natsstrand.go).
type natsBackend struct {
	env           *Env
	legacy        bool
	subject, dead string
	nc            *nats.Conn
	js            jetstream.JetStream
	strand        strandReport // legacy: what the repair found and did
}

func (b *natsBackend) name() string { return "nats" }

// server returns the trial's nats-server.
func (b *natsBackend) server(ctx context.Context) (*servers.NATS, error) {
	if b.legacy {
		return b.env.natsLegacyServer(ctx)
	}
	return b.env.natsServer(ctx)
}

func (b *natsBackend) prepare(ctx context.Context, r *run) error {
	if _, err := b.server(ctx); err != nil {
		return err
	}
	b.subject = "chaos_" + r.id
	b.dead = b.subject + "_dead"
	return b.connect(ctx)
}

func (b *natsBackend) connect(ctx context.Context) error {
	srv, err := b.server(ctx)
	if err != nil {
		return err
	}
	if b.nc != nil && b.nc.IsConnected() {
		return nil
	}
	if b.nc != nil {
		b.nc.Close()
	}
	if b.nc, err = nats.Connect(srv.URL(), nats.Timeout(2*time.Second)); err != nil {
		return fmt.Errorf("nats: driver connection: %w", err)
	}
	b.js, err = jetstream.New(b.nc)
	return err
}

func (b *natsBackend) workerArgs(r *run) []string {
	srv, _ := b.server(context.Background())
	return []string{"-backend", "nats", "-dsn", srv.URL(), "-queue", b.subject, "-dead", b.dead}
}

// seed publishes one message per id (Nats-Msg-Id = id), each stored (publish acknowledgement),
// after the first worker has declared the stream.
func (b *natsBackend) seed(ctx context.Context, ids []string) error {
	for _, id := range ids {
		if _, err := b.js.Publish(ctx, b.subject, []byte(`{"id":"`+id+`"}`), jetstream.WithMsgID(id)); err != nil {
			return fmt.Errorf("nats: seed %s: %w", b.subject, err)
		}
	}
	return nil
}

// pending counts the messages the work-queue stream still holds (acknowledged and terminated
// ones are removed; in-flight and delayed ones stay): exact. On the legacy server the messages
// stranded below the consumer's ack floor are not counted: no worker will ever get them, and
// the repair after the drain moves them (natsstrand.go).
func (b *natsBackend) pending(ctx context.Context) (int, bool, error) {
	if err := b.connect(ctx); err != nil {
		return 0, true, err
	}
	s, err := b.js.Stream(ctx, b.subject)
	if err != nil {
		return 0, true, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, true, err
	}
	n := int(info.State.Msgs)
	if b.legacy && n > 0 {
		stranded, err := b.stranded(ctx)
		if err != nil {
			return 0, true, err
		}
		n -= stranded
	}
	return n, true, nil
}

// snapshot reads every message left in the queue's stream and the dead-letter stream.
func (b *natsBackend) snapshot(ctx context.Context) (chaos.Snapshot, error) {
	snap := chaos.Snapshot{Messages: make(map[string]chaos.Observed), AbsentIsSettled: true}
	if err := b.connect(ctx); err != nil {
		return snap, err
	}
	for _, name := range []string{b.subject, b.dead} {
		s, err := b.js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return snap, fmt.Errorf("nats: stream %s: %w", name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return snap, err
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			if err != nil {
				return snap, fmt.Errorf("nats: stream %s message %d: %w", name, seq, err)
			}
			id := messageIDOf(m.Data)
			if id == "" {
				snap.Strangers++
				continue
			}
			o := snap.Messages[id]
			o.Copies++
			if o.Copies == 1 {
				o.Count = -1
			}
			if name == b.dead {
				o.Where = chaos.Dead
				o.Count, o.CountErr = -1, ""
				if v := m.Header.Get(retryCountHeader); v != "" {
					if n, err := parseCount(v); err == nil {
						o.Count = n
					} else {
						o.CountErr = fmt.Sprintf("%s %q: %v", retryCountHeader, v, err)
					}
				}
			} else if o.Where != chaos.Dead {
				o.Where = chaos.Pending
			}
			snap.Messages[id] = o
		}
	}
	return snap, nil
}

func (b *natsBackend) terminate(context.Context) (int, error) {
	return 0, errors.New("nats: no connection termination trial (use restart)")
}

// restart stops the suite's nats-server (SIGTERM or SIGKILL) and starts it again.
func (b *natsBackend) restart(ctx context.Context, mode servers.StopMode) error {
	srv, err := b.server(ctx)
	if err != nil {
		return err
	}
	return srv.Restart(ctx, mode)
}

func (b *natsBackend) lockRow(context.Context, int64, time.Duration) error {
	return errors.New("nats has no rows to lock")
}

// cleanup deletes the trial's streams.
func (b *natsBackend) cleanup(ctx context.Context) {
	if b.connect(ctx) == nil {
		for _, s := range []string{b.subject, b.dead} {
			_ = b.js.DeleteStream(ctx, s)
		}
	}
	if b.nc != nil {
		b.nc.Close()
	}
}

func (b *natsBackend) strictAttempts() bool { return true } // NumDelivered
func (b *natsBackend) sideRows() bool       { return false }

// natsServer returns the suite's nats-server, starting it on first use. Every NATS trial runs
// on a nats-server built from the module version chaos/go.mod requires (2.15), with
// sync_interval: always: built once per run (into the run's directory), started once, and a
// failed build or start fails every NATS trial of the run with its error.
func (e *Env) natsServer(ctx context.Context) (*servers.NATS, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.nats != nil {
		return e.nats, nil
	}
	if err := e.startErr["nats"]; err != nil {
		return nil, err
	}
	start := time.Now()
	bin, version, err := servers.BuildNATSServer(ctx, filepath.Join(e.Dir, "nats-bin"))
	if err == nil {
		fmt.Fprintf(e.Log, "%s nats: built %s (%s) in %v\n", time.Now().Format("15:04:05.000"), bin, version, time.Since(start).Round(time.Millisecond))
		var port int
		if port, err = servers.FreePort(NATSPorts[0], NATSPorts[1]); err == nil {
			start = time.Now()
			e.nats, err = servers.StartNATS(ctx, e.Groups, bin, filepath.Join(e.Dir, "nats-"+strconv.Itoa(port)), port)
			if err == nil {
				fmt.Fprintf(e.Log, "%s nats: own nats-server (sync_interval: always) on 127.0.0.1:%d up in %v\n", time.Now().Format("15:04:05.000"), port, time.Since(start).Round(time.Millisecond))
			}
		}
	}
	if err != nil {
		e.startErr["nats"] = err
		return nil, err
	}
	return e.nats, nil
}
