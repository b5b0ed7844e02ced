package tracectx

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	good := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tp := range []string{good, "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "7f" + good[2:]} {
		if !Valid([]byte(tp)) {
			t.Errorf("Valid(%q) = false", tp)
		}
	}
	for _, tp := range []string{
		"", good[:54], good + "-x", "ff" + good[2:], strings.ToUpper(good),
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
	} {
		if Valid([]byte(tp)) {
			t.Errorf("Valid(%q) = true", tp)
		}
	}
}

func TestNewAndChild(t *testing.T) {
	a := AppendNew(nil)
	if !Valid(a) || len(a) != Len || !strings.HasSuffix(string(a), "-00") {
		t.Fatalf("AppendNew = %q", a)
	}
	if b := AppendNew(nil); string(a) == string(b) {
		t.Fatal("two new traces are equal")
	}
	parent := []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	c := AppendChild([]byte("x"), parent)
	if c[0] != 'x' {
		t.Fatal("AppendChild did not append")
	}
	c = c[1:]
	if !Valid(c) || TraceID(c) != TraceID(parent) || string(c[36:52]) == string(parent[36:52]) || string(c[53:]) != "01" {
		t.Fatalf("child %q of %q: want the same trace and flags, a new span", c, parent)
	}
	if n := AppendChild(nil, []byte("garbage")); !Valid(n) {
		t.Fatalf("child of an invalid parent %q is invalid", n)
	}
}

func TestAppendAllocations(t *testing.T) {
	buf := make([]byte, 0, Len)
	parent := AppendNew(nil)
	if n := testing.AllocsPerRun(100, func() { buf = AppendChild(buf[:0], parent) }); n != 0 {
		t.Fatalf("AppendChild into a buffer with room: %v allocs", n)
	}
}

// BenchmarkAppendChild continues a different random parent each time, as
// the router does (one parent per publish).
func BenchmarkAppendChild(b *testing.B) {
	parents := make([][]byte, 1024)
	for i := range parents {
		parents[i] = AppendNew(nil)
	}
	dst := make([]byte, 0, Len)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		dst = AppendChild(dst[:0], parents[i%len(parents)])
		i++
	}
}
