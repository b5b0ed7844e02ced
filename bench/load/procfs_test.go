package load

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-mqtt/shoal/internal/testutil/eventually"
)

func TestParseStatCPU(t *testing.T) {
	// Field 14 (utime) 1500 and 15 (stime) 250; the command name has
	// spaces and a ')'.
	stat := "4242 (my (weird) proc) S 1 4242 4242 0 -1 4194560 1234 0 0 0 1500 250 0 0 20 0 8 0 123 456789 1024 18446744073709551615\n"
	got, err := ParseStatCPU([]byte(stat))
	if err != nil || got != 1750 {
		t.Errorf("ParseStatCPU = %d, %v; want 1750", got, err)
	}
	for _, bad := range []string{"", "4242 no-paren S 1", "4242 (x) S 1 2 3", "4242 (x) S 1 2 3 4 5 6 7 8 9 10 abc 3"} {
		if _, err := ParseStatCPU([]byte(bad)); err == nil {
			t.Errorf("ParseStatCPU(%q): no error", bad)
		}
	}
}

func TestParseStatusRSS(t *testing.T) {
	status := "Name:\tmosquitto\nVmPeak:\t   20000 kB\nVmRSS:\t    8704 kB\nRssAnon:\t 2000 kB\n"
	got, err := ParseStatusRSS([]byte(status))
	if err != nil || got != 8704*1024 {
		t.Errorf("ParseStatusRSS = %d, %v; want %d", got, err, 8704*1024)
	}
	for _, bad := range []string{"Name:\tkthreadd\n", "VmRSS:\t12 MB\n", "VmRSS:\tx kB\n"} {
		if _, err := ParseStatusRSS([]byte(bad)); err == nil {
			t.Errorf("ParseStatusRSS(%q): no error", bad)
		}
	}
}

func TestParseLoadAvg(t *testing.T) {
	got, err := ParseLoadAvg([]byte("1.58 1.87 0.72 3/512 9212\n"))
	if err != nil || got != [3]float64{1.58, 1.87, 0.72} {
		t.Errorf("ParseLoadAvg = %v, %v; want [1.58 1.87 0.72]", got, err)
	}
	for _, bad := range []string{"", "1.0 2.0", "1.0 x 3.0 1/2 3"} {
		if _, err := ParseLoadAvg([]byte(bad)); err == nil {
			t.Errorf("ParseLoadAvg(%q): no error", bad)
		}
	}
	if _, err := ReadLoadAvg(); err != nil {
		t.Errorf("ReadLoadAvg: %v", err)
	}
}

func TestParseAuxvClockTick(t *testing.T) {
	aux := func(pairs ...uint64) []byte {
		b := make([]byte, 0, 8*len(pairs))
		for _, v := range pairs {
			b = binary.NativeEndian.AppendUint64(b, v)
		}
		return b
	}
	if hz, ok := ParseAuxvClockTick(aux(6, 4096, 17, 250, 0, 0)); !ok || hz != 250 {
		t.Errorf("AT_CLKTCK 250: got %d, %v", hz, ok)
	}
	if _, ok := ParseAuxvClockTick(aux(6, 4096, 0, 0, 17, 250)); ok {
		t.Error("AT_CLKTCK after AT_NULL was read")
	}
	if _, ok := ParseAuxvClockTick(nil); ok {
		t.Error("empty auxv gave a clock tick")
	}
}

func TestProcSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	p, err := NewProc(0)
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.Sample()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	x := 0
	for time.Now().Before(deadline) { // burn CPU until the tick counter moves
		for i := range 1_000_000 {
			x += i
		}
		b, err := p.Sample()
		if err != nil {
			t.Fatal(err)
		}
		if b.CPU > a.CPU {
			if b.RSS == 0 {
				t.Error("RSS of this process read as 0")
			}
			return
		}
	}
	t.Errorf("CPU time did not grow after 2s of work (%d)", x)
}

func TestNewProcMissing(t *testing.T) {
	_, err := NewProc(1 << 30)
	if err == nil || !strings.Contains(err.Error(), "read process cpu") {
		t.Errorf("NewProc of a missing pid: err = %v", err)
	}
}

func TestThreadsCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc here")
	}
	p, err := NewProc(0)
	if err != nil {
		t.Fatal(err)
	}
	// A thread of this process named as a JIT compiler's, burning CPU
	// until its ticks show.
	named := make(chan error, 1)
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine, and the name with it
		named <- os.WriteFile(fmt.Sprintf("/proc/self/task/%d/comm", syscall.Gettid()), []byte("C2 CompilerThre"), 0)
		for !stop.Load() { // spins: the point is to use CPU
		}
	}()
	defer func() { stop.Store(true); <-done }()
	if err := <-named; err != nil {
		t.Fatalf("naming a thread of this process (/proc/self/task/TID/comm): %v", err)
	}
	eventually.True(t, 5*time.Second, "the named thread's CPU time grows", func() bool {
		d, err := p.ThreadsCPU(JITCompiler)
		if err != nil {
			t.Fatal(err)
		}
		return d > 0
	})
	if d, err := p.ThreadsCPU(func(string) bool { return false }); err != nil || d != 0 {
		t.Errorf("ThreadsCPU of no thread = %v, %v; want 0", d, err)
	}
}
