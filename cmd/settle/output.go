package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/settlehq/settle/cmd/settle/console"
	"github.com/settlehq/settle/core/ops"
)

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// figure prints a count, or "-" when unmeasured.
func figure(s ops.Stats, f ops.Figure, n int64) string {
	if !s.Measured(f) {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

func printStats(w io.Writer, all []ops.Stats) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "QUEUE\tREADY\tDELAYED\tIN FLIGHT\tDEAD\tOLDEST READY\t")
	var notes []string
	for _, s := range all {
		oldest := "-"
		if console.HasOldest(s) {
			oldest = console.Age(s.OldestReady)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Queue, figure(s, ops.FigureReady, s.Ready),
			figure(s, ops.FigureDelayed, s.Delayed), figure(s, ops.FigureInFlight, s.InFlight),
			figure(s, ops.FigureDead, s.Dead), oldest)
		if s.DeadLettering > 0 && s.Measured(ops.FigureDeadLettering) {
			notes = append(notes, fmt.Sprintf("- %s: %d messages being dead-lettered by the server, not ready and not delivered (their dead-letter destination refuses them)", s.Queue, s.DeadLettering))
		}
		for _, u := range s.Unmeasured {
			notes = append(notes, fmt.Sprintf("- %s %s: %s", s.Queue, strings.ReplaceAll(string(u.Figure), "_", " "), u.Why))
		}
		if s.Stranded > 0 {
			notes = append(notes, fmt.Sprintf("- %s: %d stranded: held by the stream, never delivered again (settle stranded)", s.Queue, s.Stranded))
		}
	}
	tw.Flush()
	if len(all) == 1 && all[0].DeadLetter != "" {
		fmt.Fprintf(w, "dead letter: %s\n", all[0].DeadLetter)
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
}

// oneLine shortens s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func printDeadList(w io.Writer, p ops.DeadPage, now time.Time) {
	if len(p.Items) == 0 {
		fmt.Fprintln(w, "no dead letters")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tDEAD AT\tAGE\tCOUNT\tORIGIN\tREASON")
	for _, d := range p.Items {
		at, age := "-", "-"
		if !d.DeadAt.IsZero() {
			at, age = d.DeadAt.UTC().Format("2006-01-02 15:04:05Z"), console.Age(now.Sub(d.DeadAt))
		}
		origin := d.Origin
		if origin == "" {
			origin = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, at, age, d.Count, origin, oneLine(d.Reason, 72))
	}
	tw.Flush()
	if p.Next != "" {
		fmt.Fprintf(w, "more: --cursor %s\n", p.Next)
	}
}

func printDead(w io.Writer, d ops.DeadLetter, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "id:\t%s\n", d.ID)
	fmt.Fprintf(tw, "origin:\t%s\n", d.Origin)
	fmt.Fprintf(tw, "count:\t%d\n", d.Count)
	if !d.DeadAt.IsZero() {
		fmt.Fprintf(tw, "dead at:\t%s (%s ago)\n", d.DeadAt.UTC().Format(time.RFC3339Nano), console.Age(now.Sub(d.DeadAt)))
	}
	if !d.Created.IsZero() {
		fmt.Fprintf(tw, "created:\t%s\n", d.Created.UTC().Format(time.RFC3339Nano))
	}
	fmt.Fprintf(tw, "reason:\t%s\n", d.Reason)
	tw.Flush()
	if len(d.Headers) > 0 {
		fmt.Fprintln(w, "headers:")
		keys := make([]string, 0, len(d.Headers))
		for k := range d.Headers {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  %s: %s\n", k, d.Headers[k])
		}
	}
	fmt.Fprintln(w, "payload:")
	for _, l := range strings.Split(console.Pretty(d.Payload), "\n") {
		fmt.Fprintf(w, "  %s\n", l)
	}
}

// The JSON shapes: an unmeasured figure is null, never a 0 that reads as "none"; so is the
// oldest ready age of an empty queue, which has none.

type statsOut struct {
	Queue         string           `json:"queue"`
	DeadLetter    string           `json:"dead_letter,omitempty"`
	Ready         *int64           `json:"ready"`
	Delayed       *int64           `json:"delayed"`
	InFlight      *int64           `json:"in_flight"`
	Dead          *int64           `json:"dead"`
	DeadLettering *int64           `json:"dead_lettering"`
	OldestReadyS  *float64         `json:"oldest_ready_seconds"`
	Stranded      int64            `json:"stranded,omitempty"`
	At            time.Time        `json:"at"`
	Unmeasured    []ops.Unmeasured `json:"unmeasured,omitempty"`
}

func statsJSON(s ops.Stats) statsOut {
	n := func(f ops.Figure, v int64) *int64 {
		if !s.Measured(f) {
			return nil
		}
		return &v
	}
	out := statsOut{Queue: s.Queue, DeadLetter: s.DeadLetter, Ready: n(ops.FigureReady, s.Ready),
		Delayed: n(ops.FigureDelayed, s.Delayed), InFlight: n(ops.FigureInFlight, s.InFlight),
		Dead: n(ops.FigureDead, s.Dead), DeadLettering: n(ops.FigureDeadLettering, s.DeadLettering), Stranded: s.Stranded, At: s.At, Unmeasured: s.Unmeasured}
	if console.HasOldest(s) {
		secs := s.OldestReady.Seconds()
		out.OldestReadyS = &secs
	}
	return out
}

type deadOut struct {
	ID      string            `json:"id"`
	Origin  string            `json:"origin"`
	Count   int               `json:"count"`
	DeadAt  *time.Time        `json:"dead_at"`
	Created *time.Time        `json:"created,omitempty"`
	Reason  string            `json:"reason"`
	Headers map[string]string `json:"headers"`
	// Payload is the body as text when it is UTF-8 (JSON included), else PayloadBase64.
	Payload       *string `json:"payload,omitempty"`
	PayloadBase64 []byte  `json:"payload_base64,omitempty"`
}

func deadJSON(d ops.DeadLetter) deadOut {
	out := deadOut{ID: d.ID, Origin: d.Origin, Count: d.Count, Reason: d.Reason, Headers: d.Headers}
	if !d.DeadAt.IsZero() {
		at := d.DeadAt.UTC()
		out.DeadAt = &at
	}
	if !d.Created.IsZero() {
		c := d.Created.UTC()
		out.Created = &c
	}
	if utf8.Valid(d.Payload) {
		s := string(d.Payload)
		out.Payload = &s
	} else {
		out.PayloadBase64 = d.Payload
	}
	return out
}

type pageOut struct {
	Items []deadOut `json:"items"`
	Next  string    `json:"next,omitempty"`
}

func pageJSON(p ops.DeadPage) pageOut {
	out := pageOut{Items: make([]deadOut, len(p.Items)), Next: p.Next}
	for i, d := range p.Items {
		out.Items[i] = deadJSON(d)
	}
	return out
}
