package realcql

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// The readiness probe speaks version 4 of the CQL native protocol
// (native_protocol_v4.spec), only as much as it needs: STARTUP, then one
// QUERY whose result is rows of text columns.

// probeTimeout bounds one probe.
const probeTimeout = 5 * time.Second

// probeQuery is the query the probe sends; its answer is the node's
// version.
const probeQuery = "SELECT release_version FROM system.local"

// Opcodes (§2.4).
const (
	opError        = 0x00
	opStartup      = 0x01
	opReady        = 0x02
	opAuthenticate = 0x03
	opQuery        = 0x07
	opResult       = 0x08
)

const (
	protoRequest  = 0x04 // version 4, request
	protoResponse = 0x84 // version 4, response
	headerLen     = 9
	// maxBody bounds the body of a response the probe accepts.
	maxBody = 1 << 20
	// resultRows is the kind of a RESULT holding rows (§4.2.5).
	resultRows = 0x0002
	// Rows metadata flags (§4.2.5.2).
	flagGlobalTablesSpec = 0x0001
	flagHasMorePages     = 0x0002
	flagNoMetadata       = 0x0004
	// consistencyOne (§3).
	consistencyOne = 0x0001
	// typeVarchar and typeASCII are the option ids of text columns (§4.2.5.2).
	typeASCII   = 0x0001
	typeVarchar = 0x000D
)

// probe connects to addr, starts a session and runs probeQuery, returning
// the release_version it answers.
func probe(ctx context.Context, addr string) (string, error) {
	rows, err := query(ctx, addr, probeQuery)
	return versionOf(rows, err)
}

// probeConn runs the probe's exchange on conn.
func probeConn(conn io.ReadWriter) (string, error) {
	return versionOf(queryConn(conn, probeQuery))
}

// versionOf returns the release_version in probeQuery's result.
func versionOf(rows [][]string, err error) (string, error) {
	if err != nil {
		return "", err
	}
	if len(rows) != 1 || len(rows[0]) != 1 {
		return "", fmt.Errorf("QUERY result: %d rows, want one with one column", len(rows))
	}
	return rows[0][0], nil
}

// Query connects to the node at addr, starts a session and runs q, whose
// result must be rows of text columns (CAST others AS text), at
// consistency ONE: a benchmark reads the node's own tables with it
// (system_views).
func Query(ctx context.Context, addr, q string) ([][]string, error) { return query(ctx, addr, q) }

// query connects to addr, starts a session and runs q, whose result must
// be rows of text columns, at consistency ONE.
func query(ctx context.Context, addr, q string) ([][]string, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	defer conn.Close() //nolint:errcheck // a probe connection; nothing was written that a close could lose
	if dl, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(dl); err != nil {
			return nil, fmt.Errorf("set deadline: %w", err)
		}
	}
	return queryConn(conn, q)
}

// queryConn runs the probe's exchange on conn: STARTUP, then q.
func queryConn(conn io.ReadWriter, query string) ([][]string, error) {
	if _, err := conn.Write(frame(0, opStartup, appendStringMap(nil, map[string]string{"CQL_VERSION": "3.0.0"}))); err != nil {
		return nil, fmt.Errorf("send STARTUP: %w", err)
	}
	op, body, err := readFrame(conn)
	if err != nil {
		return nil, fmt.Errorf("STARTUP: %w", err)
	}
	switch op {
	case opReady:
	case opAuthenticate:
		return nil, errors.New("STARTUP: the node asks for authentication (the harness configures AllowAllAuthenticator)")
	default:
		return nil, fmt.Errorf("STARTUP: %w", unexpected(op, body))
	}

	q := appendLongString(nil, query)
	q = binary.BigEndian.AppendUint16(q, consistencyOne)
	q = append(q, 0) // no query flags
	if _, err := conn.Write(frame(1, opQuery, q)); err != nil {
		return nil, fmt.Errorf("send QUERY: %w", err)
	}
	op, body, err = readFrame(conn)
	if err != nil {
		return nil, fmt.Errorf("QUERY: %w", err)
	}
	if op != opResult {
		return nil, fmt.Errorf("QUERY: %w", unexpected(op, body))
	}
	rows, err := parseTextRows(body)
	if err != nil {
		return nil, fmt.Errorf("QUERY result: %w", err)
	}
	return rows, nil
}

// frame returns a request frame.
func frame(stream int16, op byte, body []byte) []byte {
	b := make([]byte, 0, headerLen+len(body))
	b = append(b, protoRequest, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(stream))
	b = append(b, op)
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	return append(b, body...)
}

// readFrame reads one response frame.
func readFrame(r io.Reader) (op byte, body []byte, err error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, fmt.Errorf("read header: %w", err)
	}
	if h[0] != protoResponse {
		return 0, nil, fmt.Errorf("response version byte %#x, want %#x", h[0], protoResponse)
	}
	if h[1] != 0 {
		return 0, nil, fmt.Errorf("response flags %#x: compression, tracing, payloads and warnings are not supported", h[1])
	}
	n := binary.BigEndian.Uint32(h[5:])
	if n > maxBody {
		return 0, nil, fmt.Errorf("response body of %d bytes", n)
	}
	body = make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, fmt.Errorf("read body: %w", err)
	}
	return h[4], body, nil
}

// unexpected describes a response that is not the one asked for.
func unexpected(op byte, body []byte) error {
	if op != opError {
		return fmt.Errorf("unexpected response opcode %#x", op)
	}
	r := reader{b: body}
	code := r.int()
	msg := r.string()
	if r.err != nil {
		return fmt.Errorf("error response: %w", r.err)
	}
	return fmt.Errorf("error %#x: %s", code, msg)
}

// parseTextRows parses a RESULT of kind Rows whose columns are all text.
func parseTextRows(body []byte) ([][]string, error) {
	r := reader{b: body}
	if kind := r.int(); r.err == nil && kind != resultRows {
		return nil, fmt.Errorf("result kind %#x, want rows", kind)
	}
	flags := r.int()
	cols := int(r.int())
	if flags&flagHasMorePages != 0 {
		r.bytes()
	}
	if flags&flagNoMetadata == 0 {
		if flags&flagGlobalTablesSpec != 0 {
			r.string()
			r.string()
		}
		for range cols {
			if flags&flagGlobalTablesSpec == 0 {
				r.string()
				r.string()
			}
			name := r.string()
			if typ := r.short(); r.err == nil && typ != typeVarchar && typ != typeASCII {
				return nil, fmt.Errorf("column %q of type %#x, want text", name, typ)
			}
		}
	}
	n := r.int()
	if r.err != nil {
		return nil, r.err
	}
	if cols < 0 || n < 0 || int64(cols)*int64(n) > int64(len(body)) {
		return nil, fmt.Errorf("%d rows of %d columns in %d bytes", n, cols, len(body))
	}
	rows := make([][]string, 0, n)
	for range n {
		row := make([]string, 0, cols)
		for range cols {
			row = append(row, string(r.bytes()))
		}
		rows = append(rows, row)
	}
	if r.err != nil {
		return nil, r.err
	}
	return rows, nil
}

// reader decodes the protocol's notation (§3), keeping the first error.
type reader struct {
	b   []byte
	err error
}

var errShort = errors.New("truncated response")

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = errShort
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) short() uint16 {
	p := r.take(2)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint16(p)
}

func (r *reader) int() int32 {
	p := r.take(4)
	if p == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(p))
}

func (r *reader) string() string {
	return string(r.take(int(r.short())))
}

// bytes reads [bytes]; a negative length is null.
func (r *reader) bytes() []byte {
	n := r.int()
	if n < 0 {
		return nil
	}
	return r.take(int(n))
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendLongString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func appendStringMap(b []byte, m map[string]string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(m)))
	for k, v := range m {
		b = appendString(b, k)
		b = appendString(b, v)
	}
	return b
}
