package gateway

import (
	"context"
	"net/http"

	"github.com/coder/websocket"
)

// wsHandler serves MQTT over WebSocket at /mqtt with subprotocol "mqtt"
// (MQTT 5.0 §6): binary messages carry the MQTT byte stream.
func (g *Gateway) wsHandler(ctx context.Context) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/mqtt", func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
			Subprotocols:   []string{"mqtt"},
			OriginPatterns: []string{"*"}, // MQTT-over-WebSocket dashboards are served from other origins; clients authenticate in CONNECT
		})
		if err != nil {
			g.log.Debug("websocket upgrade", "remote", r.RemoteAddr, "err", err)
			return
		}
		if ws.Subprotocol() != "mqtt" {
			_ = ws.Close(websocket.StatusPolicyViolation, "subprotocol mqtt required")
			return
		}
		ws.SetReadLimit(int64(g.cfg.MaxPacketSize) + 8)
		nc := websocket.NetConn(ctx, ws, websocket.MessageBinary)
		g.serve(ctx, nc)
	})
	return mux
}
