package broker

import (
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"runtime/metrics"
	"strings"
)

// httpHandler serves /healthz (the process is up), /readyz (every role is
// ready), /metrics (the OpenTelemetry meter provider's Prometheus exporter:
// the text format, or OpenMetrics with exemplars when asked) and, when the pprof setting is
// on, Go's profiles under /debug/pprof/ and the runtime's memory classes
// under /debug/memory.
func (b *Broker) httpHandler() http.Handler {
	mux := http.NewServeMux()
	if b.cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("/debug/memory", serveMemoryClasses)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !b.Ready() {
			http.Error(w, "not ready: "+b.notReady(), http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		tel := b.tel
		b.mu.Unlock()
		if tel == nil {
			http.Error(w, "not started", http.StatusServiceUnavailable)
			return
		}
		tel.MetricsHandler().ServeHTTP(w, r)
	})
	return mux
}

// memoryMetrics are what /debug/memory reports: every class of the
// runtime's memory (they add up to what it has mapped: the heap's live
// objects, the free slots of its spans, what it returned to the system,
// stacks, the netpoller's descriptors and other off-heap structures,
// metadata), and the collector's goal and setting. The process's RSS is
// their sum less the released pages, plus the binary's resident pages
// (bench/README.md, "What an idle connection holds").
var memoryMetrics = func() []string {
	names := []string{"/gc/heap/goal:bytes", "/gc/heap/live:bytes", "/gc/gogc:percent"}
	for _, d := range metrics.All() {
		if strings.HasPrefix(d.Name, "/memory/classes/") {
			names = append(names, d.Name)
		}
	}
	return names
}()

// serveMemoryClasses writes memoryMetrics, one "name value" line each.
func serveMemoryClasses(w http.ResponseWriter, _ *http.Request) {
	samples := make([]metrics.Sample, len(memoryMetrics))
	for i, n := range memoryMetrics {
		samples[i].Name = n
	}
	metrics.Read(samples)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	var b strings.Builder
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			fmt.Fprintf(&b, "%s %d\n", s.Name, s.Value.Uint64())
		}
	}
	_, _ = io.WriteString(w, b.String())
}
