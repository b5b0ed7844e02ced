package broker

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/internal/testutil/testlog"
)

// TestPprofOnlyWhenAsked checks that Go's profiles are served only with the
// pprof setting on, and /healthz always.
func TestPprofOnlyWhenAsked(t *testing.T) {
	for _, on := range []bool{false, true} {
		cfg := config.Default()
		cfg.Pprof = on
		h := New(cfg, testlog.New(t), "test").httpHandler()
		for path, want := range map[string]int{
			"/healthz":                 http.StatusOK,
			"/debug/pprof/":            map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[on],
			"/debug/pprof/goroutine":   map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[on],
			"/debug/pprof/cmdline":     map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[on],
			"/debug/pprof/nonexisting": http.StatusNotFound,
		} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != want {
				t.Errorf("pprof %v: GET %s = %d, want %d", on, path, rec.Code, want)
			}
		}
	}
}
