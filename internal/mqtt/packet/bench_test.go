package packet

import (
	"bytes"
	"testing"
)

var benchSizes = []struct {
	name string
	size int
}{
	{"payload=64B", 64},
	{"payload=64KiB", 64 << 10},
}

// BenchmarkPublishDecode: ParseHeader and Decode of a QoS 1 MQTT 5.0
// PUBLISH (topic alias, user property) into a reused Publish.
func BenchmarkPublishDecode(b *testing.B) {
	for _, bs := range benchSizes {
		b.Run(bs.name, func(b *testing.B) {
			raw := hotPublish(bs.size).Append(nil, V5)
			var p Publish
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				h, n, err := ParseHeader(raw, 0)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Decode(h, raw[n:], V5); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPublishEncode: Append of the same PUBLISH into a reused buffer.
func BenchmarkPublishEncode(b *testing.B) {
	for _, bs := range benchSizes {
		b.Run(bs.name, func(b *testing.B) {
			p := hotPublish(bs.size)
			buf := make([]byte, 0, p.Size(V5))
			b.ReportAllocs()
			b.SetBytes(int64(p.Size(V5)))
			for b.Loop() {
				buf = p.Append(buf[:0], V5)
			}
		})
	}
}

// BenchmarkPublishRoundTrip: encode, ParseHeader, decode.
func BenchmarkPublishRoundTrip(b *testing.B) {
	for _, bs := range benchSizes {
		b.Run(bs.name, func(b *testing.B) {
			src := hotPublish(bs.size)
			buf := make([]byte, 0, src.Size(V5))
			var p Publish
			b.ReportAllocs()
			b.SetBytes(int64(src.Size(V5)))
			for b.Loop() {
				buf = src.Append(buf[:0], V5)
				h, n, err := ParseHeader(buf, 0)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Decode(h, buf[n:], V5); err != nil {
					b.Fatal(err)
				}
			}
			if !bytes.Equal(p.Payload, src.Payload) {
				b.Fatal("payload differs")
			}
		})
	}
}

// BenchmarkReaderPublish: Reader.ReadPacket and Decode over a stream of
// PUBLISH packets.
func BenchmarkReaderPublish(b *testing.B) {
	for _, bs := range benchSizes {
		b.Run(bs.name, func(b *testing.B) {
			raw := hotPublish(bs.size).Append(nil, V5)
			r := NewReader(&repeatReader{data: raw}, 4096)
			var p Publish
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				h, body, err := r.ReadPacket()
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Decode(h, body, V5); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
