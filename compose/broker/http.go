package broker

import (
	"io"
	"net/http"
	"net/http/pprof"
)

// httpHandler serves /healthz (the process is up), /readyz (every role is
// ready), /metrics (the OpenTelemetry meter provider's Prometheus exporter:
// the text format, or OpenMetrics with exemplars when asked) and, when the pprof setting is
// on, Go's profiles under /debug/pprof/.
func (b *Broker) httpHandler() http.Handler {
	mux := http.NewServeMux()
	if b.cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
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
