package broker

import "testing"

// TestWaveWatch: memory is released once per wave of at least waveMin new
// connections, once no new connection came and the parked count stopped
// growing for waveQuiet seconds; keep-alive pings waking and parking a
// steady fleet, and leaving connections, do not release.
func TestWaveWatch(t *testing.T) {
	var w waveWatch
	var releases []int
	second := 0
	feed := func(counts ...[2]int64) {
		for _, c := range counts {
			second++
			if w.tick(c[0], c[1]) {
				releases = append(releases, second)
			}
		}
	}
	// A wave of 3000: connected by second 3, parked by second 4, quiet at 5 and 6.
	feed([2]int64{500, 0}, [2]int64{1500, 400}, [2]int64{3000, 1500}, [2]int64{3000, 3000}, [2]int64{3000, 3000}, [2]int64{3000, 2990})
	if len(releases) != 1 || releases[0] != 6 {
		t.Fatalf("releases at %v, want one at second 6", releases)
	}
	// Pings waking most of the fleet at once, then parking it again.
	feed([2]int64{3000, 3000}, [2]int64{3000, 200}, [2]int64{3000, 3000}, [2]int64{3000, 3000}, [2]int64{3000, 3000})
	// Connections leave.
	feed([2]int64{3000, 2000}, [2]int64{3000, 1000}, [2]int64{3000, 1000}, [2]int64{3000, 1000})
	if len(releases) != 1 {
		t.Fatalf("releases at %v, want no more after the first", releases)
	}
	feed([2]int64{3900, 1000}, [2]int64{3900, 1900}, [2]int64{3900, 1900}, [2]int64{3900, 1900}) // 900 new: not a wave
	if len(releases) != 1 {
		t.Fatalf("releases at %v: 900 new connections are not a wave", releases)
	}
	feed([2]int64{4100, 2000}, [2]int64{4100, 2100}, [2]int64{4100, 2100}, [2]int64{4100, 2100}) // 1100 since the last release
	if len(releases) != 2 || releases[1] != second {
		t.Fatalf("releases at %v, want a second one at second %d", releases, second)
	}
}

// TestBurstWatch: memory is released once after a burst of traffic (a
// second of at least burstRate messages), once burstQuiet seconds passed
// under a twentieth of that rate; a steady rate, high or low, and a
// burst tailing off slowly release nothing until it is quiet.
func TestBurstWatch(t *testing.T) {
	var w burstWatch
	var releases []int
	second, total := 0, int64(0)
	feed := func(rates ...int64) {
		for _, r := range rates {
			second++
			total += r
			if w.tick(total) {
				releases = append(releases, second)
			}
		}
	}
	feed(0, 500, 900, 800, 999) // a steady low rate: never a burst
	if len(releases) != 0 {
		t.Fatalf("releases at %v at a low rate", releases)
	}
	feed(150000, 160000, 150000, 2000) // a burst, tailing off at second 9
	for range burstQuiet + 1 {
		feed(0) // quiet from second 10 on
	}
	if want := 9 + burstQuiet; len(releases) != 1 || releases[0] != want {
		t.Fatalf("releases at %v, want one at second %d", releases, want)
	}
	feed(0, 0, 0, 10, 0) // idle: nothing more
	if len(releases) != 1 {
		t.Fatalf("releases at %v, want no more while idle", releases)
	}
	// A steady 30k msg/s: busy all along, never over.
	for range 20 {
		feed(30000)
	}
	if len(releases) != 1 {
		t.Fatalf("releases at %v during a steady high rate", releases)
	}
	for range burstQuiet + 1 {
		feed(900) // under a twentieth: the burstQuiet-th quiet second releases
	}
	if len(releases) != 2 || releases[1] != second-1 {
		t.Fatalf("releases at %v, want a second one at second %d", releases, second-1)
	}
}
