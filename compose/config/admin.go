package config

import (
	"fmt"
	"net"
	"strings"
)

// Admin configures the admin HTTP API of a role (compose/admin), which
// `shoal ctl` talks to.
type Admin struct {
	// Listen is the API's own listener, never one of the MQTT listeners;
	// "" disables the API. Loopback by default.
	Listen string `yaml:"listen"`
	// TokenFile holds the bearer token every request must carry (its
	// first line). Empty: `shoal all` makes a random token at its first
	// start in data_dir/admin.token (mode 0600), which `shoal ctl
	// --data-dir` reads; a role of a distributed deployment serves no
	// admin API without one.
	TokenFile string `yaml:"token_file"`
	// Console serves the web console (compose/console) at / of the
	// admin listener, behind a login with the admin token or a tenant's
	// console token. On by default wherever the admin API is served.
	Console bool `yaml:"console"`
	// ConsoleTokensFile holds the tenants' console tokens: lines
	// TENANT:sha256:HEX (`shoal console-token` writes one), each of which
	// sees and changes only its tenant. Reloaded when it changes.
	ConsoleTokensFile string `yaml:"console_tokens_file"`
	// ConsoleServers are the admin APIs of a distributed deployment's
	// other processes (URLs or host:port), which the console asks beside
	// its own process's roles: every gateway, the session services and a
	// router. Empty for shoal all.
	ConsoleServers []string `yaml:"console_servers"`
	// TLSCertFile and TLSKeyFile serve the admin listener over TLS (the
	// console's cookie is then Secure); both or neither.
	TLSCertFile string `yaml:"tls_cert_file"`
	TLSKeyFile  string `yaml:"tls_key_file"`
}

// DefaultAdmin is loopback only, with the token shoal all makes.
func DefaultAdmin() Admin { return Admin{Listen: "127.0.0.1:9091", Console: true} }

// Serves reports whether a process serves the admin API: admin.listen is
// set and a token is at hand, admin.token_file's or, for shoal all (all),
// the one it makes in its data directory.
func (a Admin) Serves(all bool) bool { return a.Listen != "" && (a.TokenFile != "" || all) }

// Validate checks admin.listen.
func (a Admin) Validate() error {
	if a.Listen == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(a.Listen); err != nil {
		return fmt.Errorf("admin.listen: %q is not host:port: %w", a.Listen, err)
	}
	if (a.TLSCertFile == "") != (a.TLSKeyFile == "") {
		return fmt.Errorf("admin.tls_cert_file and admin.tls_key_file: give both or neither")
	}
	for i, s := range a.ConsoleServers {
		if strings.TrimSpace(s) == "" {
			return fmt.Errorf("admin.console_servers[%d]: empty", i)
		}
	}
	return nil
}
