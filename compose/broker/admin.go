package broker

import (
	"context"
	"errors"
	"fmt"
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
func (b *Broker) addAdmin(grp *group) error {
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
	ln, err := net.Listen("tcp", b.cfg.Admin.Listen)
	if err != nil {
		return fmt.Errorf("listen admin %s: %w", b.cfg.Admin.Listen, err)
	}
	b.mu.Lock()
	b.adminAddr = ln.Addr()
	b.mu.Unlock()
	b.log.Info("admin API listening", "addr", ln.Addr().String(), "loopback", config.Loopback(ln.Addr().String()))
	srv := &http.Server{
		Handler:           admin.Handler(roles, token, b.log.With("component", "admin")),
		ReadHeaderTimeout: 5 * time.Second,
	}
	grp.g.Add(func() error {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
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
