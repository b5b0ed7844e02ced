package realcql

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeNode answers the probe's two requests on conn as a CQL node would,
// with answer for the QUERY (the STARTUP gets startup).
func fakeNode(t *testing.T, conn net.Conn, startup byte, answer func() (byte, []byte)) {
	t.Helper()
	defer func() { _ = conn.Close() }() // the probe has read what it needs
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	reply := func(stream uint16, op byte, body []byte) {
		b := []byte{protoResponse, 0}
		b = binary.BigEndian.AppendUint16(b, stream)
		b = append(b, op)
		b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
		if _, err := conn.Write(append(b, body...)); err != nil {
			t.Errorf("fake node: write: %v", err)
		}
	}
	read := func() (byte, []byte) {
		var h [headerLen]byte
		if _, err := io.ReadFull(conn, h[:]); err != nil {
			t.Errorf("fake node: read: %v", err)
			return 0, nil
		}
		if h[0] != protoRequest {
			t.Errorf("fake node: version byte %#x", h[0])
		}
		body := make([]byte, binary.BigEndian.Uint32(h[5:]))
		if _, err := io.ReadFull(conn, body); err != nil {
			t.Errorf("fake node: read body: %v", err)
		}
		return h[4], body
	}
	op, body := read()
	if op != opStartup || !strings.Contains(string(body), "CQL_VERSION") {
		t.Errorf("fake node: first request %#x %q, want STARTUP with CQL_VERSION", op, body)
	}
	if startup != opReady {
		reply(0, startup, errorBody(0x0100, "auth please"))
		return
	}
	reply(0, opReady, nil)
	op, body = read()
	r := reader{b: body}
	if q := string(r.take(int(r.int()))); op != opQuery || q != probeQuery {
		t.Errorf("fake node: second request %#x %q, want QUERY %q", op, q, probeQuery)
	}
	op, body = answer()
	reply(1, op, body)
}

func errorBody(code int32, msg string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(code))
	return appendString(b, msg)
}

// rowsBody is a RESULT of kind Rows with one text column.
func rowsBody(global bool, values ...string) []byte {
	b := binary.BigEndian.AppendUint32(nil, resultRows)
	flags := uint32(0)
	if global {
		flags = flagGlobalTablesSpec
	}
	b = binary.BigEndian.AppendUint32(b, flags)
	b = binary.BigEndian.AppendUint32(b, 1) // columns
	// With one column, the keyspace and table come at the same place
	// whether they are global or the column's own.
	b = appendString(appendString(b, "system"), "local")
	b = appendString(b, "release_version")
	b = binary.BigEndian.AppendUint16(b, typeVarchar)
	b = binary.BigEndian.AppendUint32(b, uint32(len(values)))
	for _, v := range values {
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	return b
}

func TestProbe(t *testing.T) {
	for _, tc := range []struct {
		name    string
		startup byte
		answer  func() (byte, []byte)
		want    string // "" : an error containing errPart
		errPart string
	}{
		{"global spec", opReady, func() (byte, []byte) { return opResult, rowsBody(true, "5.0.9") }, "5.0.9", ""},
		{"per-column spec", opReady, func() (byte, []byte) { return opResult, rowsBody(false, "6.1") }, "6.1", ""},
		{"error", opReady, func() (byte, []byte) { return opError, errorBody(0x1000, "not ready yet") }, "", "not ready yet"},
		{"no rows", opReady, func() (byte, []byte) { return opResult, rowsBody(true) }, "", "0 rows"},
		{"truncated", opReady, func() (byte, []byte) { return opResult, rowsBody(true, "5.0.9")[:20] }, "", "truncated"},
		{"authentication", opAuthenticate, nil, "", "authentication"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := net.Pipe()
			done := make(chan struct{})
			go func() {
				defer close(done)
				fakeNode(t, server, tc.startup, tc.answer)
			}()
			_ = client.SetDeadline(time.Now().Add(5 * time.Second))
			got, err := probeConn(client)
			_ = client.Close()
			<-done
			if tc.want != "" {
				if err != nil || got != tc.want {
					t.Fatalf("probe: %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.errPart) {
				t.Fatalf("probe: %q, %v; want an error containing %q", got, err, tc.errPart)
			}
		})
	}
}

func TestProbeNothingListening(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	if _, err := probe(t.Context(), addr); err == nil {
		t.Fatal("probe of a closed port: no error")
	}
}

func TestOutputTailAndMark(t *testing.T) {
	dir := t.TempDir()
	var sink strings.Builder
	o, err := newOutput(filepath.Join(dir, "output.log"), &sink)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Write([]byte("old: Address already in use\n")); err != nil {
		t.Fatal(err)
	}
	o.mark()
	if o.sinceMark("already in use") {
		t.Error("text before the mark counted")
	}
	if _, err := o.Write([]byte("new: Unable to bind\n")); err != nil {
		t.Fatal(err)
	}
	if !o.sinceMark("nope", "Unable to bind") {
		t.Error("text after the mark not found")
	}
	// Much more output: the tail keeps the latest lines only.
	for range 2000 {
		if _, err := o.Write([]byte("filler line of the node's log\n")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := o.Write([]byte("the last line\n")); err != nil {
		t.Fatal(err)
	}
	tail := o.tailSuffix()
	if !strings.HasSuffix(tail, "the last line") || len(tail) > tailBytes+100 || strings.Contains(tail, "Unable to bind") {
		t.Errorf("tail of %d bytes ends %q", len(tail), tail[max(0, len(tail)-40):])
	}
	if err := o.close(); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Write([]byte("after close\n")); err != nil {
		t.Fatal(err)
	}
	logged, err := os.ReadFile(filepath.Join(dir, "output.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(logged), "old: Address") || strings.Contains(string(logged), "after close") {
		t.Errorf("log file: %d bytes, starts %q", len(logged), logged[:20])
	}
	if !strings.HasSuffix(sink.String(), "after close\n") {
		t.Error("the writer missed output after the file was closed")
	}
}
