package listener

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoal-mqtt/shoal/internal/watchfile"
)

// TLSFiles name the files of the TLS listeners' material, PEM encoded.
type TLSFiles struct {
	// CertFile is the server's certificate chain, leaf first; KeyFile its
	// private key.
	CertFile, KeyFile string
	// ClientCAFile holds the CAs whose client certificates are accepted;
	// "" asks clients for no certificate. With it, a client may present
	// a certificate (it must verify), unless RequireClientCert makes one
	// mandatory.
	ClientCAFile      string
	RequireClientCert bool
}

// Certificates is the TLS listeners' server certificate and client CAs,
// read from files and reloaded without a restart: Reload (called on
// SIGHUP by the process), and Watch, which polls the files. A handshake
// takes the material current when it starts (the tls.Config of
// ServerConfig picks it in GetConfigForClient); connections already
// established keep theirs. Files that fail to load keep the previous
// material in force.
type Certificates struct {
	files TLSFiles
	log   *slog.Logger
	cur   atomic.Pointer[tls.Config] // the current material, as a handshake's config

	mu         sync.Mutex         // serialises loads; guards the fields below
	seen       [3]watchfile.Stamp // the versions last read (cert, key, CA), whether they loaded or not
	statFailed bool               // the last poll could not stat a file (logged once)
}

// OpenCertificates loads the files; this first load must succeed (its
// error names the file at fault). log receives the reloads and their
// errors (nil: discarded).
func OpenCertificates(files TLSFiles, log *slog.Logger) (*Certificates, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if files.CertFile == "" || files.KeyFile == "" {
		return nil, errors.New("tls: a certificate file and a key file are required")
	}
	if files.RequireClientCert && files.ClientCAFile == "" {
		return nil, errors.New("tls: requiring client certificates needs a client CA file")
	}
	c := &Certificates{files: files, log: log}
	cfg, seen, err := c.load()
	if err != nil {
		return nil, err
	}
	c.cur.Store(cfg)
	c.seen = seen
	log.Info("tls certificates loaded", c.describe(cfg)...)
	return c, nil
}

// ServerConfig returns the configuration of a TLS listener: TLS 1.2 at
// least, and on each handshake the current certificate and client CAs.
func (c *Certificates) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return c.cur.Load(), nil
		},
	}
}

// Reload reads the files again. When one cannot be read or does not
// load, the previous material stays in force; the error is logged here as
// well as returned, so a caller may drop it.
func (c *Certificates) Reload() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reloadLocked()
}

func (c *Certificates) reloadLocked() error {
	cfg, seen, err := c.load()
	c.seen = seen
	if err != nil {
		c.log.Error("tls certificates not reloaded, the previous ones stay in force", "err", err)
		return err
	}
	c.cur.Store(cfg)
	c.log.Info("tls certificates reloaded", c.describe(cfg)...)
	return nil
}

// describe is what the log says of loaded material.
func (c *Certificates) describe(cfg *tls.Config) []any {
	leaf := cfg.Certificates[0].Leaf
	return []any{"cert_file", c.files.CertFile, "subject", leaf.Subject.String(),
		"serial", leaf.SerialNumber.String(), "not_after", leaf.NotAfter.UTC(),
		"client_ca_file", c.files.ClientCAFile, "require_client_cert", c.files.RequireClientCert}
}

// load reads the files into a handshake's configuration. It reads every
// file before it parses any, so that the stamps are those of all the
// versions read, each taken before its file is read (a change made while
// it is read is seen by the next poll); a file that could not be opened
// has a zero stamp.
func (c *Certificates) load() (*tls.Config, [3]watchfile.Stamp, error) {
	var seen [3]watchfile.Stamp
	var pem [3][]byte
	for i, path := range []string{c.files.CertFile, c.files.KeyFile, c.files.ClientCAFile} {
		if path == "" {
			continue
		}
		b, err := readStamped(path, &seen[i])
		if err != nil {
			return nil, seen, fmt.Errorf("tls: %w", err)
		}
		pem[i] = b
	}
	cert, err := tls.X509KeyPair(pem[0], pem[1])
	if err != nil {
		return nil, seen, fmt.Errorf("tls: certificate %s with key %s: %w", c.files.CertFile, c.files.KeyFile, err)
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
	}
	if c.files.ClientCAFile == "" {
		return cfg, seen, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem[2]) {
		return nil, seen, fmt.Errorf("tls: client CA file %s: no PEM certificate in it", c.files.ClientCAFile)
	}
	cfg.ClientCAs = pool
	cfg.ClientAuth = tls.VerifyClientCertIfGiven
	if c.files.RequireClientCert {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	// crypto/tls checks a resumed session against these CAs too (the
	// chain its first handshake verified must end in one of them), so a
	// CA taken out of the file lets none of its clients back in by
	// resumption (TestTLSResumedSessionChecksCA).
	return cfg, seen, nil
}

// readStamped reads a file and sets *st to the stamp of the version read.
func readStamped(path string, st *watchfile.Stamp) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err // *fs.PathError: names the file
	}
	defer fh.Close() //nolint:errcheck // a file opened for reading; nothing to do on error
	fi, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	*st = watchfile.StampOf(fi)
	b, err := io.ReadAll(fh)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// Watch polls the files every interval (a second when interval ≤ 0) and
// reloads them when the size, modification time or inode of one changed.
// Each version is read once: broken files are logged once, not every
// interval. It returns when ctx ends.
func (c *Certificates) Watch(ctx context.Context, interval time.Duration) {
	watchfile.Every(ctx, interval, c.poll)
}

func (c *Certificates) poll() {
	var now [3]watchfile.Stamp
	var statErr error
	for i, path := range []string{c.files.CertFile, c.files.KeyFile, c.files.ClientCAFile} {
		if path == "" {
			continue
		}
		fi, err := os.Stat(path)
		if err != nil {
			statErr = err
			break
		}
		now[i] = watchfile.StampOf(fi)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if statErr != nil {
		if !c.statFailed {
			c.statFailed = true
			c.log.Warn("tls file unreadable, the previous certificates stay in force", "err", statErr)
		}
		return
	}
	c.statFailed = false
	if now != c.seen {
		_ = c.reloadLocked() // logged there
	}
}
