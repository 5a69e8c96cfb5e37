package harness

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// ChartSystems are the systems drawn by [WriteChart], one line each.
func ChartSystems() []System {
	return []System{Fanout(StrategyWait, APIPull), Fanout(StrategyWait, APIChan),
		Reference, K8s(StrategyDrop, DefaultQueue), Baseline, Teivah, Kelindar, Disruptor}
}

// chartColors are distinguishable colours, fanout first.
var chartColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // orange
	color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}, // grey
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, // brown
	color.RGBA{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff}, // pink
}

// rateTicks are log-scale ticks labelled like "10M".
type rateTicks struct{}

// Ticks implements plot.Ticker.
func (rateTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.LogTicks{Prec: -1}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = axisRate(ts[i].Value)
		}
	}
	return ts
}

// axisRate renders a power of ten compactly: 1k, 10M, 1G.
func axisRate(v float64) string {
	for _, u := range []struct {
		f float64
		s string
	}{{1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if v >= u.f {
			return strconv.FormatFloat(v/u.f, 'g', 3, 64) + u.s
		}
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// ErrNothingToChart is [WriteChart]'s error for results without a
// one-producer throughput case of [ChartSystems].
var ErrNothingToChart = errors.New("harness: no one-producer throughput case to chart")

// WriteChart draws delivered values per second (log scale) against the
// number of watchers (log scale) for the one-producer throughput cases of
// res, one line per system of [ChartSystems], and writes it to w as SVG.
func WriteChart(w io.Writer, res *Results) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Throughput, 1 producer, queue %d (%s/%s, %d CPUs, %s)",
		DefaultQueue, res.Machine.GOOS, res.Machine.GOARCH, res.Machine.NumCPU, res.Machine.GoVersion)
	p.X.Label.Text = "watchers"
	p.Y.Label.Text = "delivered values per second"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.Y.Tick.Marker = rateTicks{}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(50), -vg.Points(30)
	p.Legend.Padding = vg.Points(2)
	p.Add(plotter.NewGrid())

	var ns []int
	drawn := 0
	for i, s := range ChartSystems() {
		var pts plotter.XYs
		for _, c := range res.Cases {
			if c.Kind == KindThroughput && c.Producers == 1 && c.Label == s.Label() && *c.DeliveredPerSec > 0 {
				pts = append(pts, plotter.XY{X: float64(c.Watchers), Y: *c.DeliveredPerSec})
				if !slices.Contains(ns, c.Watchers) {
					ns = append(ns, c.Watchers)
				}
			}
		}
		if len(pts) == 0 {
			continue
		}
		slices.SortFunc(pts, func(a, b plotter.XY) int { return int(a.X - b.X) })
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		col := chartColors[i%len(chartColors)]
		line.Color, line.Width = col, vg.Points(1.5)
		points.Color, points.Shape = col, draw.CircleGlyph{}
		p.Add(line, points)
		p.Legend.Add(s.Label(), line, points)
		drawn++
	}
	if drawn == 0 {
		return ErrNothingToChart
	}
	slices.Sort(ns)
	var ticks []plot.Tick
	for _, n := range ns {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: strconv.Itoa(n)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	// Margins so that the end points are not drawn on the frame, and a
	// free decade on top for the legend.
	p.X.Min, p.X.Max = float64(ns[0])/1.5, float64(ns[len(ns)-1])*1.5
	p.Y.Min, p.Y.Max = p.Y.Min/1.5, p.Y.Max*12

	wt, err := p.WriterTo(8*vg.Inch, 5*vg.Inch, "svg")
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}
