package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/settlehq/settle/cmd/settle/console"
	"github.com/settlehq/settle/core/ops"
	natsjs "github.com/settlehq/settle/transport-nats"
)

// strander is a queue whose backend can strand messages (NATS JetStream): messages it holds and
// will never deliver again, which the operator lists and repairs.
type strander interface {
	ListStranded(ctx context.Context, p ops.Page) (natsjs.StrandedPage, error)
	RepairStranded(ctx context.Context, sel natsjs.StrandedSelection, to natsjs.RepairTo, moved func(seq uint64)) (int, error)
}

var _ strander = (*natsjs.Ops)(nil)

const strandedUsage = `settle stranded [ls] [--limit N] [--cursor SEQ]
settle stranded repair SEQ… | --all [--to dead|queue] [-v]

A NATS JetStream work-queue stream can hold messages of the queue at or below its consumer's
ack floor: the consumer counts them settled and never delivers them again. A nats-server
crash that lost their removal leaves them (2.9, or any server without sync_interval: always
after a power loss), and so does MaxDeliver. "settle stats" counts them; "stranded" lists them
by stream sequence; "stranded repair" moves them, each copy stored before its original is
deleted: --to dead (the default when --dead names the dead letter) moves them to the dead
letter with the reason "stranded: …", where nothing runs again until you redrive them;
--to queue publishes them to the queue again, to be handled as new messages.
`

// cmdStranded runs "settle stranded …".
func cmdStranded(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "ls", "list":
			return cmdStrandedList(ctx, args[1:], stdout, stderr)
		case "repair":
			return cmdStrandedRepair(ctx, args[1:], stdout, stderr)
		case "help", "-h", "--help":
			fmt.Fprint(stdout, strandedUsage)
			return nil
		}
	}
	return cmdStrandedList(ctx, args, stdout, stderr)
}

// openStrander opens the target and checks that its backend can strand messages.
func openStrander(ctx context.Context, c *common) (strander, io.Closer, error) {
	t, err := c.target()
	if err != nil {
		return nil, nil, err
	}
	if t.kind != "nats" {
		return nil, nil, usageErr("settle stranded: only NATS JetStream strands messages (a stream holding messages its consumer will not deliver); the target is %s", t.kind)
	}
	q, closer, err := t.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	s, ok := q.(strander)
	if !ok {
		closer.Close()
		return nil, nil, fmt.Errorf("settle stranded: the %s target cannot list stranded messages", t.kind)
	}
	return s, closer, nil
}

func cmdStrandedList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newCommon("stranded ls", stderr)
	limit := c.fs.Int("limit", ops.DefaultLimit, "the most stranded messages to list")
	cursor := c.fs.String("cursor", "", "continue a listing (the next cursor a previous page printed)")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("settle stranded ls takes no arguments (got %q)", pos)
	}
	if *limit <= 0 {
		return usageErr("--limit must be positive")
	}
	s, closer, err := openStrander(ctx, c)
	if err != nil {
		return err
	}
	defer closer.Close()
	page, err := s.ListStranded(ctx, ops.Page{Limit: *limit, After: *cursor})
	if err != nil {
		return err
	}
	if c.json {
		return writeJSON(stdout, strandedJSON(page))
	}
	printStranded(stdout, page, time.Now())
	return nil
}

func cmdStrandedRepair(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newCommon("stranded repair", stderr)
	all := c.fs.Bool("all", false, "every stranded message")
	to := c.fs.String("to", "", "where they go: dead (the dead letter; the default with --dead) or queue (handled again)")
	verbose := c.fs.Bool("v", false, "print each stream sequence on stderr once it is moved")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	sel := natsjs.StrandedSelection{All: *all}
	for _, p := range pos {
		seq, err := strconv.ParseUint(p, 10, 64)
		if err != nil || seq == 0 {
			return usageErr("settle stranded repair: %q is not a stream sequence", p)
		}
		sel.Seqs = append(sel.Seqs, seq)
	}
	if sel.All == (len(sel.Seqs) > 0) {
		return usageErr("settle stranded repair: name stream sequences or --all, and only one of them")
	}
	var dest natsjs.RepairTo
	switch *to {
	case "dead":
	case "queue":
		dest = natsjs.RepairToQueue
	case "":
		if c.dead == "" {
			return usageErr("settle stranded repair: the target names no dead letter: give --dead (they wait there, nothing runs again) or --to queue (they are handled again)")
		}
	default:
		return usageErr("settle stranded repair: --to %q: dead or queue", *to)
	}
	s, closer, err := openStrander(ctx, c)
	if err != nil {
		return err
	}
	defer closer.Close()
	var moved func(uint64)
	if *verbose {
		moved = func(seq uint64) { fmt.Fprintf(stderr, "moved %d\n", seq) }
	}
	n, err := s.RepairStranded(ctx, sel, dest, moved)
	what := "all stranded"
	if !sel.All {
		what = fmt.Sprintf("sequences %v", sel.Seqs)
	}
	if c.json {
		out := map[string]any{"action": "repair", "to": dest.String(), "done": n, "selection": what}
		if err != nil {
			out["error"] = err.Error()
		}
		if jerr := writeJSON(stdout, out); jerr != nil && err == nil {
			err = jerr
		}
		return err
	}
	fmt.Fprintf(stdout, "moved %d stranded message%s to the %s (%s)\n", n, plural(n), dest, what)
	return err
}

type strandedItemOut struct {
	Seq     uint64            `json:"seq"`
	ID      string            `json:"id"`
	Stored  time.Time         `json:"stored"`
	Headers map[string]string `json:"headers,omitempty"`
	// Payload is the body as text when it is UTF-8, else PayloadBase64.
	Payload       *string `json:"payload,omitempty"`
	PayloadBase64 []byte  `json:"payload_base64,omitempty"`
}

type strandedOut struct {
	Stream   string            `json:"stream"`
	Consumer string            `json:"consumer"`
	AckFloor uint64            `json:"ack_floor"`
	Items    []strandedItemOut `json:"items"`
	Next     string            `json:"next,omitempty"`
}

func strandedJSON(p natsjs.StrandedPage) strandedOut {
	out := strandedOut{Stream: p.Stream, Consumer: p.Consumer, AckFloor: p.Floor, Items: []strandedItemOut{}, Next: p.Next}
	for _, m := range p.Items {
		it := strandedItemOut{Seq: m.Seq, ID: m.ID, Stored: m.Stored, Headers: m.Headers}
		if utf8.Valid(m.Payload) {
			text := string(m.Payload)
			it.Payload = &text
		} else {
			it.PayloadBase64 = m.Payload
		}
		out.Items = append(out.Items, it)
	}
	return out
}

func printStranded(w io.Writer, p natsjs.StrandedPage, now time.Time) {
	if len(p.Items) == 0 {
		fmt.Fprintf(w, "no stranded messages (stream %s, consumer %s, ack floor %d)\n", p.Stream, p.Consumer, p.Floor)
		return
	}
	fmt.Fprintf(w, "stream %s, consumer %s, ack floor %d: these are never delivered again\n", p.Stream, p.Consumer, p.Floor)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tSTORED\tAGE\tID\tPAYLOAD")
	for _, m := range p.Items {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", m.Seq, m.Stored.UTC().Format("2006-01-02 15:04:05Z"), console.Age(now.Sub(m.Stored)),
			m.ID, oneLine(string(m.Payload), 60))
	}
	tw.Flush()
	if p.Next != "" {
		fmt.Fprintf(w, "more: --cursor %s\n", p.Next)
	}
}
