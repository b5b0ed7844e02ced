package broker

import (
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"

	"github.com/shoal-mqtt/shoal/gateway"
)

// httpHandler serves /healthz (the process is up), /readyz (every role is
// ready), /metrics (Prometheus text format) and, when the pprof setting is
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
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		b.writeMetrics(w)
	})
	return mux
}

var gatewayMetrics = [...]struct {
	counter    gateway.Counter
	name, kind string
	help       string
}{
	{gateway.ConnectionsCurrent, "shoal_gateway_connections", "gauge", "MQTT connections established now."},
	{gateway.ConnectionsTotal, "shoal_gateway_connections_total", "counter", "MQTT connections established since start."},
	{gateway.MessagesReceived, "shoal_gateway_messages_received_total", "counter", "PUBLISH packets received from clients."},
	{gateway.MessagesSent, "shoal_gateway_messages_sent_total", "counter", "PUBLISH packets sent to clients."},
	{gateway.BytesReceived, "shoal_gateway_bytes_received_total", "counter", "Bytes of MQTT packets received."},
	{gateway.BytesSent, "shoal_gateway_bytes_sent_total", "counter", "Bytes written to MQTT clients."},
	{gateway.Dropped, "shoal_gateway_messages_dropped_total", "counter", "Messages dropped: client queue or buffer full, or above the client's maximum packet size."},
	{gateway.ACLDenied, "shoal_gateway_acl_denied_total", "counter", "Publishes, subscriptions and deliveries the ACL refused."},
	{gateway.AuthFailures, "shoal_gateway_auth_failures_total", "counter", "CONNECTs refused for wrong or missing credentials."},
}

func (b *Broker) writeMetrics(w io.Writer) {
	b.mu.Lock()
	gw, sess := b.gateway, b.session
	b.mu.Unlock()
	if gw != nil {
		for _, m := range gatewayMetrics {
			fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %d\n", m.name, m.help, m.name, m.kind, m.name, gw.Stats.Load(m.counter))
		}
		fmt.Fprintf(w, "# HELP shoal_gateway_connections_parked Idle connections parked: no reader goroutine, the socket watched by the poller.\n# TYPE shoal_gateway_connections_parked gauge\nshoal_gateway_connections_parked %d\n", gw.Parked())
		fmt.Fprintf(w, "# HELP shoal_gateway_parks_total Times an idle connection was parked.\n# TYPE shoal_gateway_parks_total counter\nshoal_gateway_parks_total %d\n", gw.Parks())
	}
	if sess != nil {
		fmt.Fprintf(w, "# HELP shoal_session_inbox_dropped_total Messages dropped because an offline session's inbox was full.\n# TYPE shoal_session_inbox_dropped_total counter\nshoal_session_inbox_dropped_total %d\n", sess.InboxDropped())
	}
	b.writeTenantMetrics(w) // quota.go
	ready := 0
	if b.Ready() {
		ready = 1
	}
	fmt.Fprintf(w, "# HELP shoal_ready Whether every role is ready.\n# TYPE shoal_ready gauge\nshoal_ready %d\n", ready)
}
