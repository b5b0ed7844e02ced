package intern

import (
	"strconv"
	"testing"
	"unsafe"
)

// TestTable: one copy per string while the table has room, a copy (never
// the argument itself, which may alias a buffer) in every case, and no
// growth beyond the limit.
func TestTable(t *testing.T) {
	tb := New(2)
	arg := string([]byte("acme"))
	a := tb.Get(arg)
	b := tb.Get(string([]byte("acme")))
	if a != "acme" || unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatal("the same string is kept twice")
	}
	if unsafe.StringData(a) == unsafe.StringData(arg) {
		t.Fatal("the table kept its argument, not a copy")
	}
	tb.Get("beta")
	c := string([]byte("gamma"))
	if got := tb.Get(c); got != c || unsafe.StringData(got) == unsafe.StringData(c) || len(tb.m) != 2 {
		t.Fatalf("a full table returned %q (its argument: %v, %d kept)", got, unsafe.StringData(got) == unsafe.StringData(c), len(tb.m))
	}
	for i := range 100 {
		tb.Get(strconv.Itoa(i))
	}
	if len(tb.m) != 2 {
		t.Fatalf("table grew to %d beyond its limit", len(tb.m))
	}
}
