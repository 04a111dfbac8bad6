// Command benchchart draws the benchmark charts and tables bench/README.md embeds, from the
// JSON lines the bench module's benchmarks write to $SETTLE_BENCH_RECORD (one line per measured
// point, type Record in bench/record_test.go).
//
//	benchchart -in bench/charts/records.jsonl -out bench/charts          # SVGs and README.md
//	benchchart -in records.jsonl -out bench/charts -md -base bench       # the markdown to stdout
//
// Records are grouped by (chart, backend) and each group becomes <chart>-<backend>.svg
// (lowercase, stable from run to run): with no x_name, a horizontal bar per series at its median
// with the range of its rounds as an error bar; with an x_name (workers, rows drained,
// percentile), a line per series over x, each point a median with its range. The title is
// "<chart> — <backend>" and a caption line gives the run's date, the machine, the load average
// over the chart's points (min–max) and the rounds per median. README.md has, per chart, that
// caption, the image and a table: each series' median, range and ratio to the raw loop's (the
// series whose name starts with "raw").
//
// Bad input (malformed JSON, a missing field, empty values, two units or two x axes in one
// chart, a point recorded twice) is an error naming the line and the field, and then nothing is
// written: every file is drawn in memory first, then written beside its destination and renamed.
// With -prune, SVGs in -out that this run did not draw (a backend that was not measured this
// time) are removed once everything is written.
//
// The charts are drawn with gonum.org/v1/plot and its SVG canvas, vg/vgsvg: it is maintained
// (the Gonum project's plotting package; v0.17.0 is of September 2025), pure Go with no cgo, and
// it writes SVG itself, so ci/bench.sh needs no browser, no headless JavaScript runtime and no C
// toolchain to redraw the charts, and they are plain text that diffs and renders on GitHub. The tool is a module of its own
// outside the workspace (like ci/testreport), so the plotting library and its fonts never become
// a dependency of settle's modules.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "benchchart:", err)
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("benchchart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "records file: JSON lines, one measured point each (required)")
	out := fs.String("out", "", "folder for the SVGs and README.md (required)")
	md := fs.Bool("md", false, "print the markdown to stdout instead of writing README.md")
	base := fs.String("base", "", "with -md: the folder the markdown's image links are relative to (default: -out)")
	prune := fs.Bool("prune", false, "remove SVGs in -out that this run did not draw")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *out == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("usage: benchchart -in RECORDS.jsonl -out DIR [-md [-base DIR]] [-prune]")
	}

	lines, err := readFile(*in)
	if err != nil {
		return err
	}
	charts, err := group(lines, filepath.Base(*in))
	if err != nil {
		return err
	}
	files := map[string][]byte{}
	var order []string
	for _, c := range charts {
		svg, err := drawSVG(c)
		if err != nil {
			return err
		}
		files[c.File()] = svg
		order = append(order, c.File())
	}
	imgDir := ""
	if *md && *base != "" {
		rel, err := filepath.Rel(*base, *out)
		if err != nil {
			return fmt.Errorf("-base: %w", err)
		}
		imgDir = filepath.ToSlash(rel)
	}
	page := markdown(charts, *in, len(lines), imgDir)
	if !*md {
		files["README.md"] = []byte(page)
		order = append(order, "README.md")
	}
	if err := writeAll(*out, order, files); err != nil {
		return err
	}
	if *prune {
		if err := pruneSVGs(*out, files); err != nil {
			return err
		}
	}
	if *md {
		_, err := io.WriteString(stdout, page)
		return err
	}
	fmt.Fprintf(stderr, "benchchart: %d charts from %d records in %s\n", len(charts), len(lines), *out)
	return nil
}

// writeAll writes every file into dir or, failing, none of them: each is written to a temporary
// file beside its destination first, and the temporary files are renamed only when all are
// written.
func writeAll(dir string, order []string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmps := map[string]string{}
	defer func() {
		for _, t := range tmps {
			os.Remove(t) // gone already when renamed
		}
	}()
	for _, name := range order {
		f, err := os.CreateTemp(dir, "."+name+".*.tmp")
		if err != nil {
			return err
		}
		tmps[name] = f.Name()
		_, err = f.Write(files[name])
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Chmod(f.Name(), 0o644)
		}
		if err != nil {
			return fmt.Errorf("writing %s: %w", filepath.Join(dir, name), err)
		}
	}
	for _, name := range order {
		if err := os.Rename(tmps[name], filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// pruneSVGs removes the SVGs in dir that are not among files.
func pruneSVGs(dir string, files map[string][]byte) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if _, drawn := files[name]; e.Type().IsRegular() && strings.HasSuffix(name, ".svg") && !drawn {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	return nil
}
