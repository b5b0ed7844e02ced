package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/shoal-mqtt/shoal/compose/admin"
	"github.com/shoal-mqtt/shoal/compose/config"
)

// adminToken returns the admin API's bearer token: admin.token_file's, or
// for `shoal all` without one the token it keeps in its data directory
// (made at the first start). "" means the API stays off: a role of a
// distributed deployment without a token file. The token is never logged.
func (b *Broker) adminToken() (string, error) {
	cfg := b.cfg.Admin
	if cfg.TokenFile != "" {
		tok, err := admin.ReadToken(cfg.TokenFile)
		if err != nil {
			return "", fmt.Errorf("admin.token_file: %w", err)
		}
		return tok, nil
	}
	if b.roles != RolesAll {
		b.log.Info("admin API off: no admin.token_file for this role", "admin_listen", cfg.Listen)
		return "", nil
	}
	if err := os.MkdirAll(b.cfg.DataDir, 0o750); err != nil {
		return "", fmt.Errorf("data dir: %w", err)
	}
	tok, path, err := admin.LoadOrCreateToken(b.cfg.DataDir)
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	b.log.Info("admin API token", "file", path)
	return tok, nil
}

// addAdmin listens on admin.listen (when set and a token is configured)
// for the admin API of the roles this process runs; the server stops
// within a second at shutdown.
func (b *Broker) addAdmin(ctx context.Context, grp *group, bb *backbone) error {
	if b.cfg.Admin.Listen == "" {
		return nil
	}
	token, err := b.adminToken()
	if err != nil || token == "" {
		return err
	}
	b.mu.Lock()
	roles := admin.Roles{GatewayID: b.cfg.Gateway.ID}
	if b.gateway != nil {
		roles.Gateway = b.gateway
	}
	if b.session != nil {
		roles.Sessions = b.session
	}
	if b.router != nil {
		roles.Router = b.router
	}
	if b.bridge != nil {
		roles.Bridge = b.bridge
	}
	b.mu.Unlock()
	roles.Health = b.health
	if bb != nil && bb.client != nil {
		roles.Lags = bb.client.Lags
	}
	ln, err := net.Listen("tcp", b.cfg.Admin.Listen)
	if err != nil {
		return fmt.Errorf("listen admin %s: %w", b.cfg.Admin.Listen, err)
	}
	b.mu.Lock()
	b.adminAddr = ln.Addr()
	b.mu.Unlock()
	b.log.Info("admin API listening", "addr", ln.Addr().String(), "loopback", config.Loopback(ln.Addr().String()))
	h := admin.Handler(roles, token, b.log.With("component", "admin"))
	closeConsole := func() error { return nil }
	if b.cfg.Admin.Console && b.adminUI != nil {
		ui, closeUI, err := b.adminUI(ctx, AdminUIParams{API: h, Token: token, Config: b.cfg, Log: b.log.With("component", "console")})
		if err != nil {
			_ = ln.Close()
			return err
		}
		closeConsole = closeUI
		mux := http.NewServeMux()
		mux.Handle("/v1/", h)
		mux.Handle("/", ui)
		h = mux
		b.log.Info("web console", "url", b.adminURL(ln.Addr()))
	}
	if b.cfg.Admin.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(b.cfg.Admin.TLSCertFile, b.cfg.Admin.TLSKeyFile)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("admin.tls_cert_file: %w", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
	}
	grp.g.Add(func() error {
		err := srv.Serve(ln)
		_ = closeConsole() // the event log it opened, if it did
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("admin http: %w", err)
		}
		return nil
	}, func(error) {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
	})
	return nil
}

// AdminUI serves every path of admin.listen outside /v1/ (the web
// console, compose/console, which cmd/shoal gives with WithAdminUI): it
// gets the admin API's handler, to ask this process's roles in process,
// and returns its handler and what to close at shutdown.
type AdminUI func(ctx context.Context, p AdminUIParams) (http.Handler, func() error, error)

// AdminUIParams are what an AdminUI is made with.
type AdminUIParams struct {
	// API is the admin API of this process's roles (bearer token).
	API    http.Handler
	Token  string
	Config config.Config
	Log    *slog.Logger
}

// WithAdminUI serves ui beside the admin API when admin.console is on.
func WithAdminUI(ui AdminUI) Option { return func(b *Broker) { b.adminUI = ui } }

// adminURL is the admin listener's URL, for the log.
func (b *Broker) adminURL(addr net.Addr) string {
	if b.cfg.Admin.TLSCertFile != "" {
		return "https://" + addr.String() + "/"
	}
	return "http://" + addr.String() + "/"
}

// health is every role's readiness, for the admin API's /v1/stats.
func (b *Broker) health() []admin.RoleHealth {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []admin.RoleHealth
	for _, r := range b.readiness() {
		out = append(out, admin.RoleHealth{Role: r.name, Ready: r.ready != nil && r.ready()})
	}
	return out
}
