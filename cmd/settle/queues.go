package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/cmd/settle/console"
	"github.com/settlehq/settle/core/ops"
	"github.com/settlehq/settle/core/sqlqueue"
	amqp "github.com/settlehq/settle/transport-amqp"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// queueList is what settle queues prints: a figure row per queue, and what the backend lets it
// list (or not).
type queueList struct {
	Queues []ops.Stats `json:"queues"`
	// Subjects are a JetStream stream's subjects with the messages each holds.
	Subjects map[string]uint64 `json:"subjects,omitempty"`
	// Scope says what the list covers on this backend.
	Scope string `json:"scope"`
}

// cmdQueues lists every queue of a target with its figures: the groups of a SQL table (or the
// table), the RabbitMQ queues the target names, the consumers and subjects of a NATS stream.
func cmdQueues(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newCommon("queues", stderr)
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("settle queues takes no arguments (got %q)", pos)
	}
	t, err := c.target()
	if err != nil {
		return err
	}
	var l queueList
	switch t.kind {
	case "sqlite", "postgres", "mysql":
		l, err = sqlQueues(ctx, t)
	case "amqp":
		l, err = amqpQueues(ctx, t)
	case "nats":
		l, err = natsQueues(ctx, t)
	}
	if err != nil {
		return err
	}
	if c.json {
		return writeJSON(stdout, l)
	}
	printQueues(stdout, l.Queues)
	if len(l.Subjects) > 0 {
		subjects := make([]string, 0, len(l.Subjects))
		for s := range l.Subjects {
			subjects = append(subjects, s)
		}
		sort.Strings(subjects)
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "SUBJECT\tSTORED\t")
		for _, s := range subjects {
			fmt.Fprintf(tw, "%s\t%d\t\n", s, l.Subjects[s])
		}
		tw.Flush()
	}
	fmt.Fprintln(stderr, "settle: "+l.Scope)
	return nil
}

// sqlQueues measures every group of a grouped table (each a queue; dead-letter groups too), or
// the table itself.
func sqlQueues(ctx context.Context, t target) (queueList, error) {
	s, tb, ref, err := t.openTable(ctx)
	if err != nil {
		return queueList{}, err
	}
	defer s.closer.Close()
	groups := []string{""}
	scope := fmt.Sprintf("table %s has no group column: it is one queue", ref)
	if tb.Columns.Group != "" {
		if groups, err = tableGroups(ctx, s, tb); err != nil {
			return queueList{}, fmt.Errorf("listing the groups of table %s: %w", ref, err)
		}
		scope = fmt.Sprintf("every group with a row in table %s (%d), dead-letter groups included; processed rows count as none", ref, len(groups))
	}
	all, err := measure(ctx, groups, func(g string) (ops.Queue, error) { return sqlqueue.NewOps(ctx, s.d, s.db, tb, g, "") })
	return queueList{Scope: scope, Queues: all}, err
}

// measure opens the ops view of each name and takes its figures.
func measure(ctx context.Context, names []string, open func(string) (ops.Queue, error)) ([]ops.Stats, error) {
	all := []ops.Stats{}
	for _, n := range names {
		q, err := open(n)
		if err != nil {
			return all, err
		}
		st, err := q.Stats(ctx)
		if err != nil {
			return all, err
		}
		all = append(all, st)
	}
	return all, nil
}

func tableGroups(ctx context.Context, s sqlDB, tb sqlqueue.Table) ([]string, error) {
	sc, err := sqlqueue.NewSchema(s.d, tb)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, "SELECT DISTINCT "+sc.Group+" FROM "+sc.QTable+" ORDER BY "+sc.Group)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// amqpQueues measures the queues the target names: RabbitMQ lists its queues only through the
// management plugin's HTTP API, which settle does not use.
func amqpQueues(ctx context.Context, t target) (queueList, error) {
	if t.queue == "" {
		return queueList{}, usageErr("RabbitMQ lists its queues only through its management API, which settle does not use: name them with --queue, --dead and --waiting")
	}
	conn, err := amqp.URL(t.dsn)()
	if err != nil {
		return queueList{}, unreachable(t, err)
	}
	defer conn.Close()
	names := append([]string{t.queue}, t.wait...)
	if t.dead != "" {
		names = append(names, t.dead)
	}
	all, err := measure(ctx, names, func(n string) (ops.Queue, error) { return amqp.NewOps(ctx, conn, n, "") })
	return queueList{Queues: all, Scope: "the RabbitMQ queues the target names (--queue, --waiting, --dead): RabbitMQ lists every queue only through its management API, which settle does not use"}, err
}

// natsQueues lists the consumers of the stream that captures the target's subject, each with
// its pending and unacknowledged counts, and the stream's subjects with what each stores.
func natsQueues(ctx context.Context, t target) (queueList, error) {
	if t.queue == "" {
		return queueList{}, usageErr("a NATS target needs a subject of the stream to list (--queue)")
	}
	c, err := natsjs.New(t.dsn, natsjs.WithLogger(slog.New(slog.DiscardHandler)),
		natsjs.NATSOptions(nats.MaxReconnects(0), nats.Timeout(5*time.Second)))
	if err != nil {
		return queueList{}, usageErr("%v", err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		return queueList{}, unreachable(t, err)
	}
	js, err := c.JetStream()
	if err != nil {
		return queueList{}, unreachable(t, err)
	}
	name, err := js.StreamNameBySubject(ctx, t.queue)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return queueList{}, &ops.TargetError{What: fmt.Sprintf("subject %q", t.queue), Why: "no stream captures it"}
	}
	if err != nil {
		return queueList{}, fmt.Errorf("finding the stream of subject %q: %w", t.queue, err)
	}
	st, err := js.Stream(ctx, name)
	if err != nil {
		return queueList{}, fmt.Errorf("stream %q: %w", name, err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		return queueList{}, fmt.Errorf("stream %q: %w", name, err)
	}
	l := queueList{Subjects: info.State.Subjects, Queues: []ops.Stats{},
		Scope: fmt.Sprintf("the consumers of stream %q (subjects %s) and the messages each subject stores", name, strings.Join(info.Config.Subjects, ", "))}
	lister := st.ListConsumers(ctx)
	for ci := range lister.Info() {
		what := "consumer " + ci.Name
		if f := ci.Config.FilterSubject; f != "" {
			what += " (" + f + ")"
		}
		l.Queues = append(l.Queues, ops.Stats{Queue: what, Ready: int64(ci.NumPending), InFlight: int64(ci.NumAckPending), At: ci.TimeStamp,
			Unmeasured: []ops.Unmeasured{
				{Figure: ops.FigureDelayed, Why: "JetStream counts a delayed redelivery in flight"},
				{Figure: ops.FigureOldestReady, Why: "per consumer, JetStream gives no age"}}})
	}
	if err := lister.Err(); err != nil {
		return l, fmt.Errorf("listing the consumers of stream %q: %w", name, err)
	}
	sort.Slice(l.Queues, func(i, j int) bool { return l.Queues[i].Queue < l.Queues[j].Queue })
	return l, nil
}

// printQueues prints one row per queue (no dead column: a dead letter is a queue, group or
// subject of its own, on its own row), then each reason a figure is unmeasured, once.
func printQueues(w io.Writer, all []ops.Stats) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "QUEUE\tREADY\tDELAYED\tIN FLIGHT\tOLDEST READY\t")
	var notes []string
	seen := map[string]bool{}
	for _, s := range all {
		oldest := "-"
		if console.HasOldest(s) {
			oldest = console.Age(s.OldestReady)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", s.Queue, figure(s, ops.FigureReady, s.Ready),
			figure(s, ops.FigureDelayed, s.Delayed), figure(s, ops.FigureInFlight, s.InFlight), oldest)
		for _, u := range s.Unmeasured {
			if u.Figure == ops.FigureDead {
				continue
			}
			n := fmt.Sprintf("- %s: %s", strings.ReplaceAll(string(u.Figure), "_", " "), u.Why)
			if !seen[n] {
				seen[n] = true
				notes = append(notes, n)
			}
		}
	}
	tw.Flush()
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
}
