package main

import (
	"fmt"
	"math"
	"path"
	"strings"
)

// markdown writes the charts' page: per chart, its caption, the image and the table of its
// figures. imgDir is the charts' folder as the page links to it ("" when the page sits beside
// them).
func markdown(charts []*chart, input string, nrecords int, imgDir string) string {
	var b strings.Builder
	b.WriteString("# Benchmark charts\n\n")
	fmt.Fprintf(&b, "Drawn by `ci/benchchart` from %s (%d records) — do not edit: `bash ci/bench.sh` runs the benchmarks and redraws, `bash ci/bench.sh --charts-only` redraws from the records. ", mdCode(input), nrecords)
	b.WriteString("Each figure is the median of the rounds with their range (min–max); ÷raw is a median divided by the raw loop's in the same chart (at the same x). ")
	b.WriteString("Ratios compare only within one run; bench/README.md reads them.\n")
	for _, c := range charts {
		fmt.Fprintf(&b, "\n## %s\n\n", mdText(c.Title()))
		fmt.Fprintf(&b, "%s\n\n", mdText(c.Caption()))
		fmt.Fprintf(&b, "![%s](%s)\n\n", mdText(c.Title()), path.Join(imgDir, c.File()))
		table(&b, c)
	}
	return b.String()
}

func table(b *strings.Builder, c *chart) {
	rows := c.rows()
	ratios, refs := false, c.rawCount() > 1
	for _, r := range rows {
		ratios = ratios || r.Ref != ""
	}
	head := []string{"series"}
	align := []string{"---"}
	if c.XName != "" {
		head, align = append(head, mdText(c.XName)), append(align, "---:")
	}
	head = append(head, mdText(c.Unit)+" (median)", "range")
	align = append(align, "---:", "---:")
	if ratios {
		head, align = append(head, "÷raw"), append(align, "---:")
		if refs {
			head, align = append(head, "raw loop"), append(align, "---")
		}
	}
	fmt.Fprintf(b, "| %s |\n| %s |\n", strings.Join(head, " | "), strings.Join(align, " | "))
	for _, r := range rows {
		cells := []string{mdText(r.Series)}
		if c.XName != "" {
			cells = append(cells, fmtX(r.X))
		}
		d := prec(r.Median) // the row's figures with the median's decimals
		cells = append(cells, fmtPrec(r.Median, d), fmtPrec(r.Min, d)+"–"+fmtPrec(r.Max, d))
		if ratios {
			switch {
			case r.Ref == "":
				cells = append(cells, "—")
			case math.IsNaN(r.Ratio):
				cells = append(cells, "")
			default:
				cells = append(cells, fmt.Sprintf("%.2f", r.Ratio))
			}
			if refs {
				cells = append(cells, mdText(r.Ref))
			}
		}
		fmt.Fprintf(b, "| %s |\n", strings.Join(cells, " | "))
	}
}

// mdText escapes what markdown would read as markup in a table cell or a heading.
func mdText(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "|", `\|`, "*", `\*`, "_", `\_`, "`", "\\`", "[", `\[`, "]", `\]`, "<", "&lt;", ">", "&gt;")
	return r.Replace(s)
}

func mdCode(s string) string { return "`" + strings.ReplaceAll(s, "`", "'") + "`" }
