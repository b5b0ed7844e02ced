package kafka

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// SASL is how a client authenticates to the brokers.
type SASL struct {
	// Mechanism is SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN.
	Mechanism string
	User      string
	Password  string
}

// The SASL mechanisms a Config may name.
const (
	SASLScramSHA512 = "SCRAM-SHA-512"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLPlain       = "PLAIN"
)

// String names the mechanism and the user, never the password.
func (s SASL) String() string { return s.Mechanism + " user " + s.User }

// GoString is String, so that %#v does not print the password either.
func (s SASL) GoString() string { return s.String() }

func (s SASL) validate() error {
	switch s.Mechanism {
	case SASLScramSHA512, SASLScramSHA256, SASLPlain:
	default:
		return fmt.Errorf("kafka.sasl.mechanism: %q is not one of %s, %s, %s", s.Mechanism, SASLScramSHA512, SASLScramSHA256, SASLPlain)
	}
	if s.User == "" {
		return errors.New("kafka.sasl.user: must not be empty")
	}
	return nil
}

// embeddedUser is the one user of the embedded broker.
const embeddedUser = "shoal"

// The properties of the credentials file (librdkafka's names, so that
// `kcat -F` reads the file as it is).
const (
	propProtocol  = "security.protocol"
	propMechanism = "sasl.mechanisms"
	propUser      = "sasl.username"
	propPassword  = "sasl.password"
)

// loadOrCreateCredentials reads the embedded broker's credentials from
// path, or makes them (a random password of 256 bits) and writes them
// there with mode 0600 when the file does not exist yet. They stay the
// same across restarts, so that tools configured with them keep working.
func loadOrCreateCredentials(path string) (*SASL, error) {
	s, err := readCredentials(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return s, err
	}
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	s = &SASL{Mechanism: SASLScramSHA512, User: embeddedUser, Password: base64.RawURLEncoding.EncodeToString(secret[:])}
	body := fmt.Sprintf("# SASL/SCRAM credentials of Shoal's embedded Kafka, made at its first start.\n"+
		"# Every client authenticates with them; keep this file private (mode 0600).\n"+
		"%s=SASL_PLAINTEXT\n%s=%s\n%s=%s\n%s=%s\n",
		propProtocol, propMechanism, s.Mechanism, propUser, s.User, propPassword, s.Password)
	if err := writePrivate(path, []byte(body)); err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	return s, nil
}

// writePrivate writes data to a new file at path, mode 0600: to a
// temporary file first, renamed into place, so that a reader never sees
// half of it.
func writePrivate(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".credentials-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if err := errors.Join(werr, f.Close()); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// readCredentials reads a credentials file written by
// loadOrCreateCredentials. Its errors name the file and the property,
// never the password.
func readCredentials(path string) (*SASL, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	defer func() { _ = f.Close() }()
	s := &SASL{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("credentials %s line %d: not key=value", path, n)
		}
		switch strings.TrimSpace(k) {
		case propMechanism:
			s.Mechanism = strings.TrimSpace(v)
		case propUser:
			s.User = strings.TrimSpace(v)
		case propPassword:
			s.Password = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("credentials %s: %w", path, err)
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("credentials %s: %w", path, err)
	}
	if s.Password == "" {
		return nil, fmt.Errorf("credentials %s: %s is missing", path, propPassword)
	}
	return s, nil
}

// AttachEmbedded returns the Config of a client that reaches the embedded
// broker of another process (a running `shoal all`) whose directory is
// dir (data_dir/kafka): through its Unix socket, with its credentials.
// Both are readable only by the user who runs that broker.
func AttachEmbedded(dir string) (Config, error) {
	sock := filepath.Join(dir, SocketName)
	if fi, err := os.Stat(sock); err != nil {
		return Config{}, fmt.Errorf("attach embedded kafka: %w (is `shoal all` running with this data dir?)", err)
	} else if fi.Mode().Type() != fs.ModeSocket {
		return Config{}, fmt.Errorf("attach embedded kafka: %s is not a socket", sock)
	}
	s, err := readCredentials(filepath.Join(dir, CredentialsName))
	if err != nil {
		return Config{}, fmt.Errorf("attach embedded kafka: %w", err)
	}
	var d net.Dialer
	return Config{
		Brokers: []string{embeddedAddr{}.String()},
		SASL:    s,
		// Whatever broker address the metadata names, it is this one.
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", sock)
		},
	}, nil
}
