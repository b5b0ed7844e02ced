package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/shoal-mqtt/shoal/kafka"
)

// KafkaSASL authenticates Shoal's connections to an external Kafka
// cluster (kafka.sasl). The password is read from a file, never from the
// configuration or the command line.
type KafkaSASL struct {
	// Mechanism is SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN; empty: no SASL.
	Mechanism    string `yaml:"mechanism"`
	User         string `yaml:"user"`
	PasswordFile string `yaml:"password_file"`
}

// KafkaTLS encrypts Shoal's connections to an external Kafka cluster
// (kafka.tls).
type KafkaTLS struct {
	Enabled bool `yaml:"enabled"`
	// CAFile verifies the brokers' certificates; empty: the system's roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are Shoal's client certificate, for brokers
	// that require one (mTLS); both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName checks the brokers' certificates against this name
	// instead of the host each broker is reached at.
	ServerName string `yaml:"server_name"`
}

// validateSecurity checks kafka.sasl and kafka.tls, naming the bad key.
func (k Kafka) validateSecurity() []error {
	var errs []error
	s, t := k.SASL, k.TLS
	if s != (KafkaSASL{}) {
		switch s.Mechanism {
		case kafka.SASLScramSHA512, kafka.SASLScramSHA256, kafka.SASLPlain:
		default:
			errs = append(errs, fmt.Errorf("kafka.sasl.mechanism: %q is not %s, %s or %s", s.Mechanism, kafka.SASLScramSHA512, kafka.SASLScramSHA256, kafka.SASLPlain))
		}
		if s.User == "" {
			errs = append(errs, errors.New("kafka.sasl.user: required with kafka.sasl.mechanism"))
		}
		if s.PasswordFile == "" {
			errs = append(errs, errors.New("kafka.sasl.password_file: required with kafka.sasl.mechanism"))
		}
	}
	if !t.Enabled && t != (KafkaTLS{}) {
		errs = append(errs, errors.New("kafka.tls.enabled: the other kafka.tls keys are set, but TLS is off"))
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		errs = append(errs, errors.New("kafka.tls.cert_file, kafka.tls.key_file: give both or neither"))
	}
	if (s != (KafkaSASL{}) || t.Enabled) && len(k.Brokers) == 0 {
		errs = append(errs, errors.New("kafka.sasl, kafka.tls: they secure an external cluster (kafka.brokers); the embedded one has its own credentials"))
	}
	return errs
}

// Security returns the SASL and TLS settings of Shoal's Kafka clients for
// an external cluster, reading the files they name (nil, nil: neither is
// configured).
func (k Kafka) Security() (*kafka.SASL, *tls.Config, error) {
	var sasl *kafka.SASL
	if s := k.SASL; s.Mechanism != "" {
		b, err := os.ReadFile(s.PasswordFile)
		if err != nil {
			return nil, nil, fmt.Errorf("kafka.sasl.password_file: %w", err)
		}
		sasl = &kafka.SASL{Mechanism: s.Mechanism, User: s.User, Password: strings.TrimRight(string(b), "\r\n")}
	}
	t := k.TLS
	if !t.Enabled {
		return sasl, nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("kafka.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("kafka.tls.ca_file: %s holds no PEM certificate", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("kafka.tls.cert_file, kafka.tls.key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return sasl, tc, nil
}

// kafkaSecurityOptions are the flags of kafka.sasl and kafka.tls.
func kafkaSecurityOptions() []option {
	return []option{
		{"kafka-sasl-mechanism", "SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN for an external Kafka (kafka.sasl.mechanism)", strOpt(func(c *Config) *string { return &c.Kafka.SASL.Mechanism })},
		{"kafka-sasl-user", "SASL user for an external Kafka (kafka.sasl.user)", strOpt(func(c *Config) *string { return &c.Kafka.SASL.User })},
		{"kafka-sasl-password-file", "file holding the SASL password (kafka.sasl.password_file)", strOpt(func(c *Config) *string { return &c.Kafka.SASL.PasswordFile })},
		{"kafka-tls", "true encrypts the connections to an external Kafka (kafka.tls.enabled)", boolOpt("kafka.tls.enabled", func(c *Config) *bool { return &c.Kafka.TLS.Enabled })},
		{"kafka-tls-ca-file", "PEM CA certificates that verify the brokers (kafka.tls.ca_file)", strOpt(func(c *Config) *string { return &c.Kafka.TLS.CAFile })},
		{"kafka-tls-cert-file", "PEM client certificate for brokers that require one (kafka.tls.cert_file)", strOpt(func(c *Config) *string { return &c.Kafka.TLS.CertFile })},
		{"kafka-tls-key-file", "PEM key of kafka.tls.cert_file (kafka.tls.key_file)", strOpt(func(c *Config) *string { return &c.Kafka.TLS.KeyFile })},
		{"kafka-tls-server-name", "name the brokers' certificates must carry, when not their host (kafka.tls.server_name)", strOpt(func(c *Config) *string { return &c.Kafka.TLS.ServerName })},
	}
}

// strOpt sets the string f returns (the options of options and
// kafkaSecurityOptions).
func strOpt(f func(c *Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *f(c) = v; return nil }
}

// boolOpt parses a boolean into what f returns; key names it in errors.
func boolOpt(key string, f func(c *Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		*f(c) = b
		return nil
	}
}
