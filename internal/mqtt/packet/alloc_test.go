package packet

import (
	"bytes"
	"testing"
)

// hotPublish is the gateway's common case: a QoS 1 MQTT 5.0 PUBLISH with a
// topic alias and a user property.
func hotPublish(payload int) *Publish {
	return &Publish{
		QoS:      1,
		Topic:    []byte("sensors/building-7/floor-3/temperature"),
		PacketID: 0x1234,
		Props: Properties{
			Has:        mask(PropTopicAlias, PropUser),
			TopicAlias: 12,
			User:       []UserProperty{{Key: []byte("trace-id"), Value: []byte("4bf92f3577b34da6")}},
		},
		Payload: bytes.Repeat([]byte{'x'}, payload),
	}
}

func TestAllocsPublishDecode(t *testing.T) {
	raw := hotPublish(64).Append(nil, V5)
	var p Publish
	allocs := testing.AllocsPerRun(1000, func() {
		h, n, err := ParseHeader(raw, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Decode(h, raw[n:], V5); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("decoding a PUBLISH into a reused Publish: %v allocs, want 0", allocs)
	}
	if d := packetDiff(hotPublish(64), &p); d != "" {
		t.Fatalf("decoded packet differs (-want +got):\n%s", d)
	}
}

func TestAllocsPublishAppend(t *testing.T) {
	p := hotPublish(64)
	buf := make([]byte, 0, p.Size(V5))
	var out []byte
	allocs := testing.AllocsPerRun(1000, func() {
		out = p.Append(buf[:0], V5)
	})
	if allocs != 0 {
		t.Fatalf("Append of a PUBLISH into a buffer with room: %v allocs, want 0", allocs)
	}
	if !bytes.Equal(out, p.Append(nil, V5)) || &out[0] != &buf[:1][0] {
		t.Fatal("Append did not write into the given buffer")
	}
}

// repeatReader returns the same bytes forever.
type repeatReader struct {
	data []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.data[r.off:])
		n += c
		r.off = (r.off + c) % len(r.data)
	}
	return n, nil
}

func TestAllocsReaderSteadyStream(t *testing.T) {
	for _, size := range []int{64, 4 << 10} { // a packet spanning reads, and many packets per read
		raw := hotPublish(size).Append(nil, V5)
		r := NewReader(&repeatReader{data: raw}, 1024)
		var p Publish
		read := func() {
			h, body, err := r.ReadPacket()
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Decode(h, body, V5); err != nil {
				t.Fatal(err)
			}
		}
		for range 100 { // warm up: the buffer grows to its working size
			read()
		}
		if allocs := testing.AllocsPerRun(1000, read); allocs != 0 {
			t.Fatalf("payload %d: ReadPacket + Decode of a steady PUBLISH stream: %v allocs per packet, want 0", size, allocs)
		}
		if d := packetDiff(hotPublish(size), &p); d != "" {
			t.Fatalf("decoded packet differs (-want +got):\n%s", d)
		}
	}
}

// TestAllocsDecodeEveryCase: every valid case decodes into a reused,
// warmed-up struct without allocating, and encodes into a buffer with room
// without allocating.
func TestAllocsDecodeEveryCase(t *testing.T) {
	for _, c := range cases {
		if !c.valid() {
			continue
		}
		h, n, err := ParseHeader(c.raw, 0)
		if err != nil {
			t.Fatal(err)
		}
		p := New(h.Type)
		body := c.raw[n:]
		if allocs := testing.AllocsPerRun(100, func() {
			if err := p.Decode(h, body, c.v); err != nil {
				t.Fatal(err)
			}
		}); allocs != 0 {
			t.Errorf("%s: decode into a reused %T: %v allocs, want 0", c.id(), p, allocs)
		}
		buf := make([]byte, 0, len(c.encoded()))
		if allocs := testing.AllocsPerRun(100, func() { buf = p.Append(buf[:0], c.v) }); allocs != 0 {
			t.Errorf("%s: Append: %v allocs, want 0", c.id(), allocs)
		}
	}
}
