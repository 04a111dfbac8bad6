package trial

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"time"

	"github.com/settlehq/settle/chaos"
	"github.com/settlehq/settle/chaos/internal/servers"
	"github.com/settlehq/settle/core/ops"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// The strand trial replays what the outside fault tests saw on nats-server 2.9 (issue 42): a
// SIGKILL of a server that writes JetStream in the background leaves messages in the
// work-queue stream at or below the consumer's ack floor, never delivered again. The workers
// drain what the consumer still delivers; the driver then does what docs/operations.md tells an
// operator: it reads the stranded count (ops Stats), moves them to the dead letter (settle
// stranded repair), purges those the service had settled before the crash (here the ledger
// says which) and redrives the others, and the workers drain again.

// strandReport is what the repair found and did, for the trial's note.
type strandReport struct {
	found, settled, redriven, wasDead int
}

// natsLegacyServer returns the run's nats-server before 2.10 (the machine's 2.9, or the one
// servers.LegacyNATSEnv names), writing JetStream in the background, starting it on first use.
func (e *Env) natsLegacyServer(ctx context.Context) (*servers.NATS, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.natsOld != nil {
		return e.natsOld, nil
	}
	if err := e.startErr["nats-legacy"]; err != nil {
		return nil, err
	}
	bin, version, err := servers.LegacyNATSServer(ctx)
	if err == nil {
		var port int
		if port, err = servers.FreePort(NATSPorts[0], NATSPorts[1]); err == nil {
			start := time.Now()
			e.natsOld, err = servers.StartNATSNoSync(ctx, e.Groups, bin, filepath.Join(e.Dir, "nats-legacy-"+strconv.Itoa(port)), port)
			if err == nil {
				fmt.Fprintf(e.Log, "%s nats: %s (%s, no fsync setting) on 127.0.0.1:%d up in %v\n", time.Now().Format("15:04:05.000"),
					bin, version, port, time.Since(start).Round(time.Millisecond))
			}
		}
	}
	if err != nil {
		e.startErr["nats-legacy"] = err
		return nil, err
	}
	return e.natsOld, nil
}

// ops opens the queue's operations view through settle's own API (a connection per call: the
// server restarts under the trial).
func (b *natsBackend) ops(ctx context.Context) (*natsjs.Ops, io.Closer, error) {
	srv, err := b.server(ctx)
	if err != nil {
		return nil, nil, err
	}
	c, err := natsjs.New(srv.URL(), natsjs.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, nil, err
	}
	if err := c.Start(ctx); err != nil {
		c.Close()
		return nil, nil, err
	}
	o, err := natsjs.NewOps(ctx, c, b.subject, b.dead)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return o, c, nil
}

// stranded counts the messages stranded below the consumer's ack floor (ops Stats).
func (b *natsBackend) stranded(ctx context.Context) (int, error) {
	o, c, err := b.ops(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	s, err := o.Stats(ctx)
	return int(s.Stranded), err
}

// repairStranded runs after the drain on the legacy server: it moves the stranded messages to
// the dead letter, purges there those the ledger shows settled, and redrives the others.
func (b *natsBackend) repairStranded(ctx context.Context, r *run) (string, error) {
	if !b.legacy {
		return "", nil
	}
	o, c, err := b.ops(ctx)
	if err != nil {
		return "", err
	}
	defer c.Close()
	s, err := o.Stats(ctx)
	if err != nil || s.Stranded == 0 {
		return "", err
	}
	entries, _, err := chaos.ReadLedgerFile(filepath.Join(r.dir, "ledger"))
	if err != nil {
		return "", err
	}
	settled := make(map[string]bool)
	for _, e := range entries {
		if e.Final() {
			settled[e.ID] = true
		}
	}
	b.strand.found = int(s.Stranded)
	n, err := o.RepairStranded(ctx, natsjs.StrandedSelection{All: true}, natsjs.RepairToDeadLetter, nil)
	if err != nil {
		return "", fmt.Errorf("nats: repairing %d stranded messages: %w", s.Stranded, err)
	}
	dead, err := ops.Collect(ctx, o, ops.Filter{Reason: natsjs.StrandedReason}, 0)
	if err != nil {
		return "", err
	}
	var purge, redrive []string
	for _, d := range dead {
		if settled[messageIDOf(d.Payload)] {
			purge = append(purge, d.ID)
		} else {
			redrive = append(redrive, d.ID)
		}
	}
	if len(purge) > 0 {
		if _, err := o.Purge(ctx, ops.Selection{IDs: purge}); err != nil {
			return "", err
		}
	}
	if len(redrive) > 0 {
		if _, err := o.Redrive(ctx, ops.Selection{IDs: redrive}, ops.RedriveOptions{}); err != nil {
			return "", err
		}
	}
	// A stranded message that settle had dead-lettered before the crash (its copy stored, the
	// original's +TERM applied, its removal lost) is moved with its own message id: the dead-letter
	// stream's duplicate window drops the second copy, and no stranded dead letter shows for it.
	b.strand.settled, b.strand.redriven, b.strand.wasDead = len(purge), len(redrive), n-len(dead)
	r.env.logf("%s: %d stranded below the ack floor; %d moved to the dead letter: %d settled before (purged), %d not (redriven), %d dead letters already (the copy dropped as a duplicate)",
		r.tr.Key(), b.strand.found, n, len(purge), len(redrive), b.strand.wasDead)
	return fmt.Sprintf("%d messages stranded below the consumer's ack floor after the crashes, found by ops Stats and moved to the dead letter by the repair (%d): %d the ledger shows settled before the crash (purged there), %d not (redriven), %d were dead letters already (the repeated copy dropped by the duplicate window)",
		b.strand.found, n, len(purge), len(redrive), b.strand.wasDead), nil
}
