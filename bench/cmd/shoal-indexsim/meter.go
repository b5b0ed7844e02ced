package main

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// mark is one reading of the process: wall clock, CPU time and objects
// allocated so far.
type mark struct {
	at     time.Time
	cpu    time.Duration
	allocs uint64
}

// now reads a mark. The allocation count comes from runtime/metrics,
// which does not stop the world as ReadMemStats does: a mark is taken
// around every batch.
func now() mark {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/tiny/allocs:objects"}}
	metrics.Read(s)
	return mark{at: time.Now(), cpu: processCPU(), allocs: s[0].Value.Uint64() + s[1].Value.Uint64()}
}

// span adds up the marks' differences over the parts of a phase it
// measures: the shard calls, without the making of their inputs.
type span struct {
	wall, cpu time.Duration
	allocs    uint64
	open      mark
}

func (s *span) start() { s.open = now() }

func (s *span) stop() {
	m := now()
	s.wall += m.at.Sub(s.open.at)
	s.cpu += m.cpu - s.open.cpu
	s.allocs += m.allocs - s.open.allocs
}

// liveHeap collects garbage and returns the live heap, the figure
// shoal-distbench reads from a router process (/gc/heap/live:bytes after
// a collection), so that the two compare.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// peakRSS returns the process's peak resident memory (VmHWM), 0 when
// /proc does not say.
func peakRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			f := strings.Fields(string(rest))
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseUint(f[0], 10, 64)
				if err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}

// machine describes where and from what the figures were taken.
type machine struct {
	Date    string `json:"date"`
	Command string `json:"command"`
	Commit  string `json:"commit"`
	CPU     string `json:"cpu"`
	Cores   int    `json:"cores"`
	Go      string `json:"go"`
	MemGiB  int    `json:"memory_gib,omitempty"`
	// LoadAvg is the machine's 1-minute load average at the start and
	// at the end. It decays over minutes, so a high one says something
	// else ran beside the run or shortly before it.
	LoadAvg [2]float64 `json:"load_avg_start_end"`
}

// commandLine is the command that reproduces the run, its arguments
// quoted where a shell would need it (an empty -readme).
func commandLine(args []string) string {
	words := []string{"go", "run", "./bench/cmd/shoal-indexsim"}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'$*?") {
			a = strconv.Quote(a)
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

func machineInfo(args []string) machine {
	m := machine{
		Date:    time.Now().UTC().Format(time.RFC3339),
		Command: commandLine(args),
		Cores:   runtime.NumCPU(),
		Go:      runtime.Version(),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 2 && f[0] == "MemTotal:" {
			if kb, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				m.MemGiB = int((kb + 1<<19) >> 20)
			}
		}
	}
	m.LoadAvg[0] = loadAvg()
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	return m
}

// loadAvg returns the machine's 1-minute load average, 0 when /proc does
// not say.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	return v
}
