package broker

import "testing"

// TestWaveWatch: memory is released once per wave of at least waveMin
// parked connections, after the count stopped growing for waveQuiet
// seconds; pings moving a steady count, and leaving connections, do not
// release.
func TestWaveWatch(t *testing.T) {
	var w waveWatch
	var releases []int
	second := 0
	feed := func(counts ...int64) {
		for _, n := range counts {
			second++
			if w.tick(n) {
				releases = append(releases, second)
			}
		}
	}
	feed(0, 500, 1500, 3000, 3000, 2990) // a wave: quiet at seconds 5 and 6
	if len(releases) != 1 || releases[0] != 6 {
		t.Fatalf("releases at %v, want one at second 6", releases)
	}
	feed(3000, 2980, 3005, 2995, 3000, 2990, 3000) // pings: the count moves a little
	feed(2000, 1000, 1000, 1000)                   // connections leave
	if len(releases) != 1 {
		t.Fatalf("releases at %v, want no more after the first", releases)
	}
	feed(1500, 1900, 1900, 1900) // 900 more than the fewest: not a wave
	if len(releases) != 1 {
		t.Fatalf("releases at %v: 900 connections are not a wave", releases)
	}
	feed(2100, 2100, 2100) // 1100 more than the fewest (1000)
	if len(releases) != 2 || releases[1] != second {
		t.Fatalf("releases at %v, want a second one at second %d", releases, second)
	}
}
