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

// TestIdleWatch: a quiet broker (under idleRate messages and idleConnects
// new connections a second for idleQuiet seconds) releases memory when its
// heap holds more than the slack over its live objects, at most once every
// idleEvery seconds; a busy one, or a quiet one without garbage, does not.
func TestIdleWatch(t *testing.T) {
	const live = 40 << 20
	var w idleWatch
	var releases []int
	second := 0
	var messages, total int64
	feed := func(n int, rate, connects int64, objects uint64) {
		for range n {
			second++
			messages += rate
			total += connects
			if w.tick(messages, total, objects, live) {
				releases = append(releases, second)
			}
		}
	}
	garbage := uint64(live + live/8)
	feed(30, idleRate, 0, garbage) // busy: the runtime's business
	feed(30, 0, idleConnects, garbage)
	if len(releases) != 0 {
		t.Fatalf("releases at %v while busy", releases)
	}
	feed(idleQuiet-1, idleRate-1, idleConnects-1, garbage)
	if len(releases) != 0 {
		t.Fatalf("releases at %v before %d quiet seconds", releases, idleQuiet)
	}
	feed(1, 0, 0, garbage)
	if len(releases) != 1 || releases[0] != second {
		t.Fatalf("releases at %v, want one at second %d", releases, second)
	}
	feed(idleEvery-1, 0, 0, garbage)
	if len(releases) != 1 {
		t.Fatalf("releases at %v: more than one in %d s", releases, idleEvery)
	}
	feed(1, 0, 0, live+live/32) // under the slack (a sixteenth)
	if len(releases) != 1 {
		t.Fatalf("releases at %v with %d bytes of garbage", releases, live/32)
	}
	feed(1, 0, 0, garbage)
	if len(releases) != 2 || releases[1] != second {
		t.Fatalf("releases at %v, want a second one at second %d", releases, second)
	}
	w.released() // a wave's release counts: the next quiet one waits idleEvery
	feed(idleEvery-1, 0, 0, garbage)
	if len(releases) != 2 {
		t.Fatalf("releases at %v within %d s of another release", releases, idleEvery)
	}
	// A small heap: the slack is at least idleSlackMin.
	var small idleWatch
	for i := range 2 * idleQuiet {
		if small.tick(0, 0, 4<<20+idleSlackMin-1, 4<<20) {
			t.Fatalf("a release at second %d with less than idleSlackMin of garbage", i+1)
		}
	}
}
