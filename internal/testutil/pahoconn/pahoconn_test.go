package pahoconn

import (
	"net"
	"sync"
	"testing"
)

// TestLocked: what Locked returns is a sync.Locker (what Paho looks for)
// and still the connection it wraps.
func TestLocked(t *testing.T) {
	a, b := net.Pipe()
	defer func() { _ = a.Close(); _ = b.Close() }()
	c := Locked(a)
	if _, ok := c.(sync.Locker); !ok {
		t.Fatal("Locked's connection is not a sync.Locker: Paho would not lock it")
	}
	go func() { _, _ = c.Write([]byte("x")) }()
	buf := make([]byte, 1)
	if _, err := b.Read(buf); err != nil || buf[0] != 'x' {
		t.Fatalf("read %q, %v through the wrapped connection", buf, err)
	}
}
