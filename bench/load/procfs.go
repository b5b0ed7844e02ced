package load

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// defaultClockTick is USER_HZ on every Linux architecture Go supports; the
// auxiliary vector's AT_CLKTCK says so when it is readable.
const defaultClockTick = 100

// ParseStatCPU returns utime + stime, in clock ticks, from the contents of
// /proc/PID/stat. The command name (field 2) may contain spaces and
// parentheses, so fields are counted from the last ')'.
func ParseStatCPU(stat []byte) (uint64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("parse /proc stat: no ')' after the command name")
	}
	fields := bytes.Fields(stat[i+1:])
	// After ')': state is field 3, so utime (14) and stime (15) are at
	// indexes 11 and 12.
	if len(fields) < 13 {
		return 0, fmt.Errorf("parse /proc stat: %d fields after the command name, want at least 13", len(fields))
	}
	utime, err := strconv.ParseUint(string(fields[11]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse /proc stat utime: %w", err)
	}
	stime, err := strconv.ParseUint(string(fields[12]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse /proc stat stime: %w", err)
	}
	return utime + stime, nil
}

// ParseStatusRSS returns VmRSS in bytes from the contents of
// /proc/PID/status.
func ParseStatusRSS(status []byte) (uint64, error) {
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || !bytes.Equal(f[1], []byte("kB")) {
			return 0, fmt.Errorf("parse /proc status: VmRSS line %q", bytes.TrimSpace(line))
		}
		kb, err := strconv.ParseUint(string(f[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse /proc status VmRSS: %w", err)
		}
		return kb * 1024, nil
	}
	return 0, errors.New("parse /proc status: no VmRSS line (a kernel thread or a zombie?)")
}

// ParseAuxvClockTick returns AT_CLKTCK (type 17) from the contents of
// /proc/self/auxv: pairs of native-endian machine words, ended by
// AT_NULL. It returns false when absent.
func ParseAuxvClockTick(auxv []byte) (uint64, bool) {
	const atNull, atClkTck = 0, 17
	for i := 0; i+16 <= len(auxv); i += 16 {
		typ := binary.NativeEndian.Uint64(auxv[i:])
		val := binary.NativeEndian.Uint64(auxv[i+8:])
		switch typ {
		case atNull:
			return 0, false
		case atClkTck:
			return val, val > 0
		}
	}
	return 0, false
}

// ProcSample is one reading of a process's CPU time and resident memory.
type ProcSample struct {
	CPU time.Duration
	RSS uint64 // bytes
}

// Proc reads a process's CPU time and RSS from /proc.
type Proc struct {
	dir string // /proc/PID or /proc/self
	hz  uint64
}

// NewProc returns a reader of process pid's /proc files; pid 0 means this
// process. It checks that the files are readable now.
func NewProc(pid int) (*Proc, error) {
	dir := "/proc/self"
	if pid != 0 {
		dir = "/proc/" + strconv.Itoa(pid)
	}
	p := &Proc{dir: dir, hz: defaultClockTick}
	if auxv, err := os.ReadFile("/proc/self/auxv"); err == nil {
		if hz, ok := ParseAuxvClockTick(auxv); ok {
			p.hz = hz
		}
	}
	if _, err := p.Sample(); err != nil {
		return nil, err
	}
	return p, nil
}

// Sample reads the process's CPU time (user + system) and RSS now.
func (p *Proc) Sample() (ProcSample, error) {
	stat, err := os.ReadFile(p.dir + "/stat")
	if err != nil {
		return ProcSample{}, fmt.Errorf("read process cpu: %w", err)
	}
	ticks, err := ParseStatCPU(stat)
	if err != nil {
		return ProcSample{}, fmt.Errorf("%s: %w", p.dir, err)
	}
	status, err := os.ReadFile(p.dir + "/status")
	if err != nil {
		return ProcSample{}, fmt.Errorf("read process rss: %w", err)
	}
	rss, err := ParseStatusRSS(status)
	if err != nil {
		return ProcSample{}, fmt.Errorf("%s: %w", p.dir, err)
	}
	cpu := time.Duration(ticks) * time.Second / time.Duration(p.hz)
	return ProcSample{CPU: cpu, RSS: rss}, nil
}

// ParseLoadAvg returns the 1, 5 and 15 minute load averages from the
// contents of /proc/loadavg.
func ParseLoadAvg(b []byte) ([3]float64, error) {
	var out [3]float64
	f := bytes.Fields(b)
	if len(f) < 3 {
		return out, fmt.Errorf("parse /proc/loadavg: %d fields, want at least 3", len(f))
	}
	for i := range out {
		v, err := strconv.ParseFloat(string(f[i]), 64)
		if err != nil {
			return out, fmt.Errorf("parse /proc/loadavg: %w", err)
		}
		out[i] = v
	}
	return out, nil
}

// ReadLoadAvg reads the machine's load averages now.
func ReadLoadAvg() ([3]float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return [3]float64{}, fmt.Errorf("read load average: %w", err)
	}
	return ParseLoadAvg(b)
}

// ThreadsCPU returns the CPU time (user + system) of the process's threads
// whose name (/proc/PID/task/TID/comm) match accepts: a JVM's JIT
// compiler threads, say, whose work says whether it has warmed up. A
// thread that ends between the listing and the read is left out.
func (p *Proc) ThreadsCPU(match func(name string) bool) (time.Duration, error) {
	tasks, err := os.ReadDir(p.dir + "/task")
	if err != nil {
		return 0, fmt.Errorf("read threads: %w", err)
	}
	var ticks uint64
	for _, t := range tasks {
		dir := p.dir + "/task/" + t.Name()
		comm, err := os.ReadFile(dir + "/comm")
		if err != nil || !match(string(bytes.TrimSpace(comm))) {
			continue
		}
		stat, err := os.ReadFile(dir + "/stat")
		if err != nil {
			continue
		}
		n, err := ParseStatCPU(stat)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", dir, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / time.Duration(p.hz), nil
}

// JITCompiler matches the names of a HotSpot JVM's JIT compiler threads
// ("C1 CompilerThre", "C2 CompilerThre": the kernel keeps 15 bytes).
func JITCompiler(name string) bool { return strings.Contains(name, "CompilerThre") }
