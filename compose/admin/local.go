package admin

import (
	"bytes"
	"io"
	"net/http"
)

// LocalServer is the server name of a process's own admin API asked in
// process (LocalTransport): the console of a process lists it first.
const LocalServer = "http://this-process"

// LocalTransport serves an APIClient's requests to LocalServer with h in
// process, without a socket (how a process's console asks its own
// roles), and the others with next (nil: http.DefaultTransport).
func LocalTransport(h http.Handler, next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return localTransport{h, next}
}

type localTransport struct {
	h    http.Handler
	next http.RoundTripper
}

func (t localTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme+"://"+req.URL.Host != LocalServer {
		return t.next.RoundTrip(req)
	}
	rec := &recorder{header: http.Header{}, code: http.StatusOK}
	t.h.ServeHTTP(rec, req)
	return &http.Response{
		Status: http.StatusText(rec.code), StatusCode: rec.code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rec.header, Body: io.NopCloser(&rec.body), ContentLength: int64(rec.body.Len()), Request: req,
	}, nil
}

// recorder is the ResponseWriter of a request served in process.
type recorder struct {
	header http.Header
	code   int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.code, r.wrote = code, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}
