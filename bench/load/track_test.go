package load

import "testing"

func TestTracker(t *testing.T) {
	seq := func(from, to uint32) []uint32 { // [from, to)
		var s []uint32
		for i := from; i < to; i++ {
			s = append(s, i)
		}
		return s
	}
	cat := func(parts ...[]uint32) []uint32 {
		var s []uint32
		for _, p := range parts {
			s = append(s, p...)
		}
		return s
	}
	cases := []struct {
		name  string
		seqs  []uint32
		sent  uint64
		want  TrackCounts
		fresh int // how many Observe calls report a first arrival
	}{
		{"in order", seq(0, 100), 100, TrackCounts{Unique: 100}, 100},
		{"nothing received", nil, 7, TrackCounts{Tail: 7}, 0},
		{"tail not delivered", seq(0, 90), 100, TrackCounts{Unique: 90, Tail: 10}, 90},
		{"gap", cat(seq(0, 10), seq(15, 20)), 20, TrackCounts{Unique: 15, Lost: 5}, 15},
		{"first messages lost", seq(3, 10), 10, TrackCounts{Unique: 7, Lost: 3}, 7},
		{"duplicate", []uint32{0, 1, 1, 2, 2, 2}, 3, TrackCounts{Unique: 3, Duplicates: 3}, 3},
		{"reordered, then complete", []uint32{0, 2, 1, 3}, 4, TrackCounts{Unique: 4, Reordered: 1}, 4},
		{"late arrival then its duplicate", []uint32{0, 5, 3, 3}, 6, TrackCounts{Unique: 3, Reordered: 1, Duplicates: 1, Lost: 3}, 3},
		{"duplicate of an old message in the window", cat(seq(0, 1000), []uint32{1}), 1000, TrackCounts{Unique: 1000, Duplicates: 1}, 1000},
		{"beyond the window", cat(seq(0, 2000), []uint32{5}), 2000, TrackCounts{Unique: 2000, Stale: 1}, 2000},
		{"big jump clears the window", cat([]uint32{0}, []uint32{5000, 4999, 5000}), 5001,
			TrackCounts{Unique: 3, Lost: 4998, Reordered: 1, Duplicates: 1}, 3},
		// A late arrival further back than the window cannot be told from
		// a duplicate: it stays counted as lost, and is reported stale.
		{"late arrival beyond the window", cat(seq(0, 10), []uint32{10 + trackWindow + 1, 10}), 10 + trackWindow + 2,
			TrackCounts{Unique: 11, Lost: trackWindow + 1, Stale: 1}, 11},
		{"late arrival at the window edge", cat(seq(0, 10), []uint32{10 + trackWindow - 1, 10}), 10 + trackWindow,
			TrackCounts{Unique: 12, Lost: trackWindow - 2, Reordered: 1}, 12},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr Tracker
			fresh := 0
			for _, s := range c.seqs {
				if tr.Observe(s) {
					fresh++
				}
			}
			if got := tr.Counts(c.sent); got != c.want {
				t.Errorf("Counts(%d) = %+v, want %+v", c.sent, got, c.want)
			}
			if fresh != c.fresh {
				t.Errorf("%d first arrivals reported, want %d", fresh, c.fresh)
			}
		})
	}
}

func TestTrackCountsAdd(t *testing.T) {
	a := TrackCounts{Unique: 1, Duplicates: 2, Reordered: 3, Stale: 4, Lost: 5, Tail: 6}
	a.Add(TrackCounts{Unique: 10, Duplicates: 20, Reordered: 30, Stale: 40, Lost: 50, Tail: 60})
	want := TrackCounts{Unique: 11, Duplicates: 22, Reordered: 33, Stale: 44, Lost: 55, Tail: 66}
	if a != want {
		t.Errorf("Add = %+v, want %+v", a, want)
	}
}
