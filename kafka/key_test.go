package kafka

import (
	"bytes"
	"errors"
	"testing"
)

// keyCases are record keys and what they hold. The first ones are ordinary
// tenants, whose keys must stay the bytes every earlier release wrote
// (tenant + "/" + rest): they decide the partitions of existing data.
var keyCases = []struct {
	tenant, rest, key string
}{
	// Ordinary tenants: exactly tenant/rest.
	{"acme", "sensors/1/temp", "acme/sensors/1/temp"},
	{"acme", "client-7", "acme/client-7"},
	{"", "plain", "/plain"},
	{"", "", "/"},
	{"acme", "", "acme/"},
	{"acme", "/leading", "acme//leading"},
	{"acme", "a/+/#", "acme/a/+/#"},
	{"acme", "100%/x%2F", "acme/100%/x%2F"}, // the rest is never escaped
	{"t-1.x_y", "$SYS/broker/version", "t-1.x_y/$SYS/broker/version"},
	{"ünï", "çødé", "ünï/çødé"},
	// Tenants with '/' or '%': escaped.
	{"a/b", "c", "a%2Fb/c"},
	{"/", "", "%2F/"},
	{"%", "x", "%25/x"},
	{"%2F", "x", "%252F/x"},
	{"a%b/c%", "d/e", "a%25b%2Fc%25/d/e"},
	{"//", "//", "%2F%2F///"},
}

func TestKeyBytes(t *testing.T) {
	for _, c := range keyCases {
		if got := Key(c.tenant, c.rest); string(got) != c.key || len(got) != cap(got) {
			t.Errorf("Key(%q, %q) = %q (cap %d), want %q of exact capacity", c.tenant, c.rest, got, cap(got), c.key)
		}
		if got := AppendKey([]byte("pre"), c.tenant, c.rest); string(got) != "pre"+c.key {
			t.Errorf("AppendKey(pre, %q, %q) = %q, want %q", c.tenant, c.rest, got, "pre"+c.key)
		}
		r := NewRecord(TopicMessages, nil, PartitionByKey, testEnvelopes()[EventPublish])
		r.SetKey(c.tenant, c.rest)
		if string(r.Key) != c.key {
			t.Errorf("SetKey(%q, %q): key %q, want %q", c.tenant, c.rest, r.Key, c.key)
		}
		tenant, rest, err := SplitKey([]byte(c.key))
		if err != nil || string(tenant) != c.tenant || string(rest) != c.rest {
			t.Errorf("SplitKey(%q) = %q, %q, %v; want %q, %q", c.key, tenant, rest, err, c.tenant, c.rest)
		}
	}
}

func TestSplitKeyRefuses(t *testing.T) {
	for _, key := range []string{
		"", "no-separator", "\x00tick", // not tenant keys at all
		"a%/b", "a%2/b", "%/b", "a%2f/b", "a%41/b", "a%zz/b", "%%25/b", // escapes other than %25 and %2F
	} {
		if tenant, rest, err := SplitKey([]byte(key)); err == nil || !errors.Is(err, ErrKey) {
			t.Errorf("SplitKey(%q) = %q, %q, %v; want an error wrapping ErrKey", key, tenant, rest, err)
		}
	}
}

func TestKeyAllocations(t *testing.T) {
	buf := make([]byte, 0, 64)
	for _, c := range keyCases {
		if n := testing.AllocsPerRun(100, func() { buf = AppendKey(buf[:0], c.tenant, c.rest) }); n != 0 {
			t.Errorf("AppendKey(%q, %q) into a large enough buffer: %.0f allocations, want 0", c.tenant, c.rest, n)
		}
		if n := testing.AllocsPerRun(100, func() { buf = Key(c.tenant, c.rest) }); n != 1 {
			t.Errorf("Key(%q, %q): %.0f allocations, want 1", c.tenant, c.rest, n)
		}
	}
	key := []byte("acme/sensors/1/temp")
	if n := testing.AllocsPerRun(100, func() { _, _, _ = SplitKey(key) }); n != 0 {
		t.Errorf("SplitKey of a key without escapes: %.0f allocations, want 0", n)
	}
}

// FuzzKey: every tenant and rest give a key that splits back into them.
func FuzzKey(f *testing.F) {
	for _, c := range keyCases {
		f.Add(c.tenant, c.rest)
	}
	f.Fuzz(func(t *testing.T, tenant, rest string) {
		key := Key(tenant, rest)
		if len(key) != keyLen(tenant, rest) {
			t.Fatalf("Key(%q, %q) = %q has %d bytes, keyLen says %d", tenant, rest, key, len(key), keyLen(tenant, rest))
		}
		gotTenant, gotRest, err := SplitKey(key)
		if err != nil || string(gotTenant) != tenant || string(gotRest) != rest {
			t.Fatalf("SplitKey(Key(%q, %q) = %q) = %q, %q, %v", tenant, rest, key, gotTenant, gotRest, err)
		}
	})
}

// FuzzSplitKey: a key SplitKey accepts is the one key of its tenant and
// rest, so no two keys name the same tenant and rest.
func FuzzSplitKey(f *testing.F) {
	for _, c := range keyCases {
		f.Add([]byte(c.key))
	}
	f.Add([]byte("a%2f/b"))
	f.Add([]byte("%%/"))
	f.Fuzz(func(t *testing.T, key []byte) {
		tenant, rest, err := SplitKey(key)
		if err != nil {
			if !errors.Is(err, ErrKey) {
				t.Fatalf("SplitKey(%q): %v does not wrap ErrKey", key, err)
			}
			return
		}
		if again := Key(string(tenant), string(rest)); !bytes.Equal(again, key) {
			t.Fatalf("SplitKey(%q) = %q, %q, whose key is %q", key, tenant, rest, again)
		}
	})
}
