package load

import (
	"math"
	"testing"
)

func TestSummarize(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		in   []float64
		want Spread
	}{
		{[]float64{3, 1, 2}, Spread{Median: 2, Min: 1, Max: 3, N: 3}},
		{[]float64{4, 1, 3, 2}, Spread{Median: 2.5, Min: 1, Max: 4, N: 4}},
		{[]float64{7}, Spread{Median: 7, Min: 7, Max: 7, N: 1}},
		{[]float64{5, nan, 1}, Spread{Median: 3, Min: 1, Max: 5, N: 2}},
	}
	for _, c := range cases {
		if got := Summarize(c.in); got != c.want {
			t.Errorf("Summarize(%v) = %+v, want %+v", c.in, got, c.want)
		}
	}
	for _, in := range [][]float64{nil, {nan}} {
		got := Summarize(in)
		if got.N != 0 || !math.IsNaN(got.Median) || !math.IsNaN(got.Min) || !math.IsNaN(got.Max) {
			t.Errorf("Summarize(%v) = %+v, want N 0 and NaNs", in, got)
		}
	}
}

func TestSummarizeDoesNotReorderInput(t *testing.T) {
	in := []float64{3, 1, 2}
	Summarize(in)
	if in[0] != 3 || in[1] != 1 || in[2] != 2 {
		t.Errorf("input changed to %v", in)
	}
}

func TestRatio(t *testing.T) {
	if got := Ratio(3, 2); got != 1.5 {
		t.Errorf("Ratio(3, 2) = %g, want 1.5", got)
	}
	for _, c := range [][2]float64{{1, 0}, {math.NaN(), 1}, {1, math.NaN()}} {
		if got := Ratio(c[0], c[1]); !math.IsNaN(got) {
			t.Errorf("Ratio(%g, %g) = %g, want NaN", c[0], c[1], got)
		}
	}
}
