package config

import (
	"net"
	"net/netip"
)

// Exposure is an operators' listener reachable from beyond this machine,
// with the warning a process logs about it at start.
type Exposure struct {
	Key, Addr, Warning string
}

// Exposed returns the operators' listeners that listen beyond loopback:
// http_listen, which authenticates nobody, and admin.listen when the
// admin API is served (all: the process is shoal all, which serves it
// without admin.token_file) without admin.tls_cert_file, whose bearer
// token (and the console's login) travels unencrypted. Both
// default to loopback. The MQTT listeners are the broker's to warn about,
// with how clients authenticate.
func (c Config) Exposed(all bool) []Exposure {
	var out []Exposure
	if c.HTTPListen != "" && !Loopback(c.HTTPListen) {
		paths := "/metrics, /healthz and /readyz"
		if c.Pprof {
			paths = "/metrics, /healthz, /readyz, /debug/pprof/ and /debug/memory"
		}
		out = append(out, Exposure{"http_listen", c.HTTPListen,
			"no authentication on http_listen: " + paths + " are served to anyone on a listener beyond loopback"})
	}
	if c.Admin.Serves(all) && !Loopback(c.Admin.Listen) && c.Admin.TLSCertFile == "" {
		out = append(out, Exposure{"admin.listen", c.Admin.Listen,
			"admin API on a listener beyond loopback: its bearer token crosses the network unencrypted"})
	}
	return out
}

// Loopback reports whether a listen address binds loopback only
// (127.0.0.0/8, ::1, localhost); an empty host (":9090") binds every
// interface.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
