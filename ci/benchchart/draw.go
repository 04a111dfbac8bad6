package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

func init() {
	// Liberation Sans has Arial's metrics, so text measured here fits where a viewer without
	// Liberation substitutes Arial or Helvetica (the SVG names the family, fonts are not embedded).
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	plotter.DefaultFont = plot.DefaultFont
}

const (
	svgWidth  = 7 * vg.Inch
	lineH     = 3.6 * vg.Inch // the plot of a line chart
	barSlot   = 26            // points per bar
	barWidth  = 14
	captionH  = 22
	legendRow = 13
	margin    = 8
)

// rawGreys tell several raw loops of one chart apart.
var rawGreys = []color.Color{color.Gray{Y: 130}, color.Gray{Y: 70}, color.Gray{Y: 175}}

// seriesColors gives each series its colour: raw loops grey, the others the plotutil palette in
// order.
func seriesColors(c *chart) []color.Color {
	out := make([]color.Color, len(c.Series))
	n, raw := 0, 0
	for i, s := range c.Series {
		if s.isRaw() {
			out[i] = rawGreys[raw%len(rawGreys)]
			raw++
			continue
		}
		out[i] = plotutil.Color(n)
		n++
	}
	return out
}

// drawSVG draws c as an SVG document.
func drawSVG(c *chart) ([]byte, error) {
	return drawOn(c, func(w, h vg.Length) vg.CanvasWriterTo { return vgsvg.New(w, h) })
}

// drawOn draws c on a canvas of newCanvas: the plot with its title, the legend of a line chart
// under it, and the caption line at the bottom.
func drawOn(c *chart, newCanvas func(w, h vg.Length) vg.CanvasWriterTo) (_ []byte, err error) {
	defer func() {
		// gonum/plot reports some impossible geometry by panicking; make it this chart's error.
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: drawing: %v", c.File(), r)
		}
	}()
	p := plot.New()
	p.Title.Text = c.Title()
	p.Title.Padding = 6
	var legend *plot.Legend
	var plotH, legendH vg.Length
	if c.XName == "" {
		plotH, err = bars(p, c)
	} else {
		legend, err = lines(p, c)
		plotH = lineH
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.File(), err)
	}
	if legend != nil {
		legendH = vg.Length(len(c.Series))*(legendRow+legend.Padding) + margin
	}

	cv := newCanvas(svgWidth, plotH+legendH+captionH)
	dc := draw.New(cv)
	p.Draw(draw.Crop(dc, margin, -margin, legendH+captionH, -margin/2))
	if legend != nil {
		legend.Draw(draw.Crop(dc, 2*margin, 0, captionH, -plotH))
	}
	sty := text.Style{
		Color:   color.Gray{Y: 80},
		Font:    font.From(plot.DefaultFont, 9),
		Handler: plot.DefaultTextHandler,
		XAlign:  draw.XLeft,
		YAlign:  draw.YBottom,
	}
	caption := c.Caption()
	if w, room := sty.Width(caption), svgWidth-2*margin; w > room {
		sty.Font.Size *= room / w // a long caption (runs over two days, several machines) still fits
	}
	dc.FillText(sty, vg.Point{X: margin, Y: margin}, caption)

	var buf bytes.Buffer
	if _, err := cv.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("%s: %w", c.File(), err)
	}
	return buf.Bytes(), nil
}

// bars draws a horizontal bar per series, first series on top: the median, the range as an
// error bar, the median written beside it. It returns the height the plot needs.
func bars(p *plot.Plot, c *chart) (vg.Length, error) {
	n := len(c.Series)
	names := make([]string, n)
	colors := seriesColors(c)
	for i, s := range c.Series {
		pos := float64(n - 1 - i)
		names[n-1-i] = s.Name
		pt := s.Points[0]
		b, err := plotter.NewBarChart(plotter.Values{pt.Median}, barWidth)
		if err != nil {
			return 0, err
		}
		b.Horizontal = true
		b.XMin = pos
		b.Color = colors[i]
		b.LineStyle.Width = 0
		eb, err := plotter.NewXErrorBars(errorBars{
			XYs:     plotter.XYs{{X: pt.Median, Y: pos}},
			XErrors: plotter.XErrors{{Low: pt.Median - pt.Min, High: pt.Max - pt.Median}},
		})
		if err != nil {
			return 0, err
		}
		eb.CapWidth = barWidth * 0.7
		lb, err := plotter.NewLabels(plotter.XYLabels{
			XYs:    plotter.XYs{{X: math.Max(pt.Max, pt.Median), Y: pos}},
			Labels: []string{fmtNum(pt.Median)},
		})
		if err != nil {
			return 0, err
		}
		lb.Offset = vg.Point{X: 4}
		for j := range lb.TextStyle {
			lb.TextStyle[j].YAlign = draw.YCenter
			lb.TextStyle[j].Font.Size = 9
		}
		p.Add(b, eb, lb)
	}
	grid := plotter.NewGrid()
	grid.Horizontal.Width = 0
	p.Add(grid)
	p.NominalY(names...)
	p.X.Label.Text = c.Unit
	p.X.Min = math.Min(0, p.X.Min)
	return vg.Length(n)*barSlot + 80, nil
}

// lines draws a line per series over x: the medians joined, the ranges as error bars. A
// percentile axis is drawn as categories (p50, p90, p99, p99.9 evenly spaced); other axes are
// linear, or logarithmic when x spans a factor of 50 or more. The legend is returned to be drawn under the plot, where it hides no point.
func lines(p *plot.Plot, c *chart) (*plot.Legend, error) {
	var xs []float64
	for _, s := range c.Series {
		for _, pt := range s.Points {
			if !slices.Contains(xs, pt.X) {
				xs = append(xs, pt.X)
			}
		}
	}
	slices.Sort(xs)
	categorical := c.XName == "percentile"
	pos := func(x float64) float64 {
		if categorical {
			return float64(slices.Index(xs, x))
		}
		return x
	}

	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = 10
	legend.ThumbnailWidth = 24
	legend.Padding = 3
	colors := seriesColors(c)
	grid := plotter.NewGrid()
	grid.Horizontal.Color, grid.Vertical.Color = color.Gray{Y: 225}, color.Gray{Y: 225}
	p.Add(grid)
	for i, s := range c.Series {
		xys := make(plotter.XYs, len(s.Points))
		errs := make(plotter.YErrors, len(s.Points))
		for j, pt := range s.Points {
			xys[j] = plotter.XY{X: pos(pt.X), Y: pt.Median}
			errs[j].Low, errs[j].High = pt.Median-pt.Min, pt.Max-pt.Median
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		l.Color, pts.Color = colors[i], colors[i]
		l.Width = 1.5
		if s.isRaw() {
			l.Dashes = []vg.Length{5, 3}
		}
		pts.Shape = plotutil.Shape(i)
		eb, err := plotter.NewYErrorBars(errorBars{XYs: xys, YErrors: errs})
		if err != nil {
			return nil, err
		}
		eb.Color = colors[i]
		p.Add(l, pts, eb)
		legend.Add(s.Name, l, pts)
	}
	switch {
	case categorical:
		names := make([]string, len(xs))
		for i, x := range xs {
			names[i] = "p" + fmtX(x)
		}
		p.NominalX(names...)
		p.X.Min, p.X.Max = -0.25, float64(len(xs))-0.75
	case len(xs) <= 12:
		// A tick at each measured x (1, 2, 4, 8 workers; prefetch 1, 50, 300), and a log axis
		// when they span a wide range, so the small ones do not crowd at the origin.
		ticks := make(plot.ConstantTicks, len(xs))
		for i, x := range xs {
			ticks[i] = plot.Tick{Value: x, Label: fmtX(x)}
		}
		p.X.Tick.Marker = ticks
		if xs[0] > 0 && xs[len(xs)-1]/xs[0] >= 50 {
			p.X.Scale = plot.LogScale{}
		}
	}
	p.X.Label.Text = c.XName
	p.Y.Label.Text = c.Unit
	p.Y.Min = math.Min(0, p.Y.Min)
	return &legend, nil
}

// errorBars is the XYer with its errors that NewXErrorBars and NewYErrorBars take.
type errorBars struct {
	plotter.XYs
	plotter.XErrors
	plotter.YErrors
}
