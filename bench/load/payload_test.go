package load

import (
	"errors"
	"testing"
)

func TestStampRoundTrip(t *testing.T) {
	cases := []Stamp{
		{},
		{SentNs: 1, Publisher: 2, Seq: 3},
		{SentNs: -5, Publisher: 1<<32 - 1, Seq: 1<<32 - 1},
		{SentNs: 1<<62 + 12345, Publisher: 999, Seq: 123456789},
	}
	for _, want := range cases {
		b := make([]byte, 64)
		for i := range b {
			b[i] = 0xAA
		}
		PutStamp(b, want)
		got, err := ReadStamp(b)
		if err != nil || got != want {
			t.Errorf("ReadStamp(PutStamp(%+v)) = %+v, %v", want, got, err)
		}
		for i := StampSize; i < len(b); i++ {
			if b[i] != 0xAA {
				t.Fatalf("PutStamp wrote byte %d beyond the stamp", i)
			}
		}
	}
}

func TestStampWireLayout(t *testing.T) {
	b := make([]byte, StampSize)
	PutStamp(b, Stamp{SentNs: 0x0102030405060708, Publisher: 0x0a0b0c0d, Seq: 0x11121314})
	want := []byte{8, 7, 6, 5, 4, 3, 2, 1, 0x0d, 0x0c, 0x0b, 0x0a, 0x14, 0x13, 0x12, 0x11}
	if string(b) != string(want) {
		t.Errorf("stamp bytes % x, want % x", b, want)
	}
}

func TestReadStampShort(t *testing.T) {
	if _, err := ReadStamp(make([]byte, StampSize-1)); !errors.Is(err, errShortPayload) {
		t.Errorf("ReadStamp of 15 bytes: err = %v, want errShortPayload", err)
	}
}
