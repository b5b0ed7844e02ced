package broker

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
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
			"/debug/memory":            map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[on],
		} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != want {
				t.Errorf("pprof %v: GET %s = %d, want %d", on, path, rec.Code, want)
			}
		}
	}
}

// TestMemoryClasses: /debug/memory names each memory class of the runtime
// with its bytes, and their total is the runtime's total.
func TestMemoryClasses(t *testing.T) {
	cfg := config.Default()
	cfg.Pprof = true
	rec := httptest.NewRecorder()
	New(cfg, testlog.New(t), "test").httpHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/memory", nil))
	got := map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(rec.Body.String()), "\n") {
		name, value, ok := strings.Cut(line, " ")
		n, err := strconv.ParseUint(value, 10, 64)
		if !ok || err != nil {
			t.Fatalf("line %q is not a name and a number", line)
		}
		got[name] = n
	}
	var sum uint64
	for name, n := range got {
		if strings.HasPrefix(name, "/memory/classes/") && name != "/memory/classes/total:bytes" {
			sum += n
		}
	}
	for _, name := range []string{"/memory/classes/other:bytes", "/memory/classes/heap/unused:bytes", "/gc/gogc:percent"} {
		if _, ok := got[name]; !ok {
			t.Errorf("no %s in %q", name, rec.Body.String())
		}
	}
	if total := got["/memory/classes/total:bytes"]; total == 0 || sum != total {
		t.Errorf("the classes add up to %d, total %d", sum, total)
	}
}
