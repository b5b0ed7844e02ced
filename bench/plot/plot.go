package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// result is the part of bench/load.Result that the plots need.
type result struct {
	Name     string `json:"name"`
	Label    string `json:"label"`
	Round    int    `json:"round"`
	Scenario string `json:"scenario"`
	Measured struct {
		DeliveriesPerSec float64 `json:"deliveries_per_s"`
	} `json:"measured"`
	Latency *struct {
		CDF []struct {
			P  float64 `json:"p"`
			Us float64 `json:"us"`
		} `json:"cdf"`
	} `json:"latency_us"`
	Series []struct {
		T        float64 `json:"t"`
		Phase    string  `json:"phase"`
		Received float64 `json:"received"`
	} `json:"series"`
}

func (r *result) group() string {
	if r.Name != "" {
		return r.Name
	}
	return r.Scenario
}

func loadResults(dir string) ([]*result, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("list results: %w", err)
	}
	var out []*result
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read result: %w", err)
		}
		var r result
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("decode result %s: %w", f, err)
		}
		if r.Scenario != "" {
			out = append(out, &r)
		}
	}
	return out, nil
}

// representative returns the run with the median deliveries/s (the lower
// middle one for an even count).
func representative(runs []*result) *result {
	if len(runs) == 0 {
		return nil
	}
	s := slices.Clone(runs)
	slices.SortStableFunc(s, func(x, y *result) int {
		switch {
		case x.Measured.DeliveriesPerSec < y.Measured.DeliveriesPerSec:
			return -1
		case x.Measured.DeliveriesPerSec > y.Measured.DeliveriesPerSec:
			return 1
		}
		return x.Round - y.Round
	})
	return s[(len(s)-1)/2]
}

// colour returns the i-th line colour.
func colour(i int) color.Color {
	palette := [...]color.Color{
		color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
		color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
		color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
		color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	}
	return palette[i%len(palette)]
}

// drawAll writes <group>-latency.png and <group>-throughput.png for every
// group of results with traffic, and returns the files written.
func drawAll(results []*result, labels []string, dir string) ([]string, error) {
	groups := map[string][]*result{}
	var names []string
	for _, r := range results {
		if r.Scenario == "connections" {
			continue
		}
		if _, ok := groups[r.group()]; !ok {
			names = append(names, r.group())
		}
		groups[r.group()] = append(groups[r.group()], r)
	}
	slices.Sort(names)
	var files []string
	for _, n := range names {
		var reps []*result
		for _, l := range labels {
			var runs []*result
			for _, r := range groups[n] {
				if r.Label == l {
					runs = append(runs, r)
				}
			}
			if rep := representative(runs); rep != nil {
				reps = append(reps, rep)
			}
		}
		if len(reps) == 0 {
			continue
		}
		f := filepath.Join(dir, n+"-latency.png")
		ok, err := drawLatency(n, reps, f)
		if err != nil {
			return files, fmt.Errorf("plot %s latency: %w", n, err)
		}
		if ok {
			files = append(files, f)
		}
		f = filepath.Join(dir, n+"-throughput.png")
		if err := drawThroughput(n, reps, f); err != nil {
			return files, fmt.Errorf("plot %s throughput: %w", n, err)
		}
		files = append(files, f)
	}
	return files, nil
}

// nines maps a percentile to -log10(1 - p/100): 90% → 1, 99% → 2.
func nines(p float64) float64 { return -math.Log10(1 - p/100) }

// ninesTicks labels the percentile axis.
type ninesTicks struct{}

func (ninesTicks) Ticks(lo, hi float64) []plot.Tick {
	var t []plot.Tick
	for k := math.Floor(lo); k <= hi; k++ {
		label := strconv.FormatFloat(100*(1-math.Pow(10, -k)), 'f', max(0, int(k)-2), 64) + "%"
		t = append(t, plot.Tick{Value: k, Label: label})
	}
	return t
}

func drawLatency(name string, reps []*result, file string) (bool, error) {
	p := plot.New()
	p.Title.Text = name + ": latency by percentile (median round)"
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency (µs, log scale)"
	p.X.Tick.Marker = ninesTicks{}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	drawn := false
	for i, r := range reps {
		if r.Latency == nil {
			continue
		}
		var pts plotter.XYs
		for _, q := range r.Latency.CDF {
			if q.P >= 100 || q.Us <= 0 {
				continue // the maximum has no finite position on this axis
			}
			pts = append(pts, plotter.XY{X: nines(q.P), Y: q.Us})
		}
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return false, fmt.Errorf("line %s: %w", r.Label, err)
		}
		l.Color = colour(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (round %d)", r.Label, r.Round), l)
		drawn = true
	}
	if !drawn {
		return false, nil
	}
	return true, save(p, file)
}

func drawThroughput(name string, reps []*result, file string) error {
	p := plot.New()
	p.Title.Text = name + ": deliveries per second (median round)"
	p.X.Label.Text = "seconds since publishing started"
	p.Y.Label.Text = "deliveries/s"
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	for i, r := range reps {
		var pts plotter.XYs
		prev := 0.0
		for _, s := range r.Series {
			// A point counts what arrived since the previous one: a second,
			// except the last, which ends at the run's stop.
			if dt := s.T - prev; dt > 0 {
				pts = append(pts, plotter.XY{X: s.T, Y: s.Received / dt})
			}
			prev = s.T
		}
		if len(pts) == 0 {
			continue
		}
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("line %s: %w", r.Label, err)
		}
		l.Color = colour(i)
		l.Width = vg.Points(1.5)
		s.Color = l.Color
		s.Shape = draw.CircleGlyph{}
		s.Radius = vg.Points(2)
		p.Add(l, s)
		p.Legend.Add(fmt.Sprintf("%s (round %d)", r.Label, r.Round), l, s)
	}
	p.Y.Min = 0
	return save(p, file)
}

func save(p *plot.Plot, file string) error {
	if err := p.Save(18*vg.Centimeter, 11*vg.Centimeter, file); err != nil {
		return fmt.Errorf("save %s: %w", file, err)
	}
	return nil
}
