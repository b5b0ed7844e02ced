package cqlstore

import (
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gocql/gocql"
)

// Config is the CQL view store's section of Shoal's configuration
// (`cql.*`).
type Config struct {
	// Hosts are the contact points, "host" or "host:port" (`cql.hosts`);
	// the driver discovers the other nodes from them. Every entry that
	// names a port names the same one (nodes share one native transport
	// port); without a port, 9042.
	Hosts []string `yaml:"hosts"`
	// Keyspace holds Shoal's tables (`cql.keyspace`): a CQL identifier
	// (a letter, then letters, digits or '_', at most 48). Open creates it
	// when it is missing.
	Keyspace string `yaml:"keyspace"`
	// ReplicationFactor is the replication factor of the keyspace Open
	// creates (SimpleStrategy) when it is missing
	// (`cql.replication_factor`): at most the nodes of the cluster, so 1
	// for a single node. Open refuses to create a keyspace with more
	// replicas than the cluster has nodes (it could not serve a QUORUM
	// request), naming this key and the node count; the default, 3, is not
	// lowered to fit a smaller cluster (one still starting would get a
	// keyspace with too few replicas for good). An existing keyspace is
	// used as it is, never altered: create it yourself for
	// NetworkTopologyStrategy (on ScyllaDB then with tablets = {'enabled':
	// false}: see the package documentation).
	ReplicationFactor int `yaml:"replication_factor"`
	// Consistency of reads and writes (`cql.consistency`): quorum (the
	// default), local_quorum, one, local_one, two, three or all. With
	// local_* the lightweight transactions of the slot leases use
	// LOCAL_SERIAL, otherwise SERIAL. Reads see the writes before them
	// only when read and write replicas overlap (quorum, local_quorum in
	// one data center, all, or replication factor 1).
	Consistency string `yaml:"consistency"`
	// LocalDC, when set, makes the driver prefer the nodes of this data
	// center (`cql.local_dc`); needed for local_quorum and local_one to
	// mean the data center Shoal runs in.
	LocalDC string `yaml:"local_dc"`
	// Timeout bounds one request (`cql.timeout`); keep it above the
	// server's own timeouts (Cassandra: 2 s writes, 5 s reads, 10 s range
	// reads, by default) so the server answers first.
	Timeout time.Duration `yaml:"timeout"`
	// ConnectTimeout bounds connecting to a node (`cql.connect_timeout`).
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// MaxBatchBytes is the largest router batch written as one unlogged
	// batch (`cql.max_batch_bytes`, estimated from the rows' encoded
	// size); ApplyShard splits a bigger one (see the package
	// documentation for what atomicity remains). At most 15 MiB: the
	// server refuses requests and mutations above 16 MiB by default.
	MaxBatchBytes int `yaml:"max_batch_bytes"`
	// Username and Password authenticate with PasswordAuthenticator
	// (`cql.username`, `cql.password`); empty: no authentication.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// PasswordFile holds the password instead of Password
	// (`cql.password_file`: a mounted Secret, say), read at Open; its
	// trailing line breaks are dropped.
	PasswordFile string `yaml:"password_file"`
}

// Defaults of the configuration.
const (
	DefaultKeyspace          = "shoal"
	DefaultReplicationFactor = 3
	DefaultConsistency       = "quorum"
	DefaultTimeout           = 12 * time.Second
	DefaultConnectTimeout    = 10 * time.Second
	DefaultMaxBatchBytes     = 4 << 20
	// MaxBatchBytesLimit is the largest MaxBatchBytes: below the 16 MiB
	// that Cassandra's native transport (native_transport_max_frame_size)
	// and commit log (max mutation size: half of the 32 MiB segment)
	// accept by default, with room for the statements' overhead.
	MaxBatchBytesLimit = 15 << 20
	// minBatchBytes is the smallest MaxBatchBytes: tests set it low to
	// exercise split batches.
	minBatchBytes = 1 << 10
)

// DefaultConfig returns the configuration the store runs with unless told
// otherwise: no hosts (they must be configured).
func DefaultConfig() Config {
	return Config{
		Keyspace:          DefaultKeyspace,
		ReplicationFactor: DefaultReplicationFactor,
		Consistency:       DefaultConsistency,
		Timeout:           DefaultTimeout,
		ConnectTimeout:    DefaultConnectTimeout,
		MaxBatchBytes:     DefaultMaxBatchBytes,
	}
}

// keyspaceRE is an unquoted CQL identifier as a keyspace name allows it.
var keyspaceRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,47}$`)

// consistency returns the driver's level for a cql.consistency value.
// ANY and EACH_QUORUM are left out: the store reads too.
func consistency(name string) (gocql.Consistency, bool) {
	switch name {
	case "one":
		return gocql.One, true
	case "two":
		return gocql.Two, true
	case "three":
		return gocql.Three, true
	case "quorum":
		return gocql.Quorum, true
	case "all":
		return gocql.All, true
	case "local_quorum":
		return gocql.LocalQuorum, true
	case "local_one":
		return gocql.LocalOne, true
	}
	return 0, false
}

// Validate checks the configuration and returns one error per bad key,
// each naming it.
func (c Config) Validate() error {
	var errs []error
	if len(c.Hosts) == 0 {
		errs = append(errs, errors.New("cql.hosts: at least one contact point is needed"))
	}
	if _, err := hostsPort(c.Hosts); err != nil {
		errs = append(errs, err)
	}
	if !keyspaceRE.MatchString(c.Keyspace) {
		errs = append(errs, fmt.Errorf("cql.keyspace: %q is not a CQL identifier (a letter, then letters, digits or '_', at most 48)", c.Keyspace))
	}
	if c.ReplicationFactor < 1 {
		errs = append(errs, fmt.Errorf("cql.replication_factor: %d, must be ≥ 1", c.ReplicationFactor))
	}
	if _, ok := consistency(c.Consistency); !ok {
		errs = append(errs, fmt.Errorf("cql.consistency: %q is not one of quorum, local_quorum, one, local_one, two, three, all", c.Consistency))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("cql.timeout: %s, must be > 0", c.Timeout))
	}
	if c.ConnectTimeout <= 0 {
		errs = append(errs, fmt.Errorf("cql.connect_timeout: %s, must be > 0", c.ConnectTimeout))
	}
	if c.MaxBatchBytes < minBatchBytes || c.MaxBatchBytes > MaxBatchBytesLimit {
		errs = append(errs, fmt.Errorf("cql.max_batch_bytes: %d, must be between %d and %d", c.MaxBatchBytes, minBatchBytes, MaxBatchBytesLimit))
	}
	if c.Password != "" && c.Username == "" {
		errs = append(errs, errors.New("cql.password: set without cql.username"))
	}
	if c.PasswordFile != "" && c.Username == "" {
		errs = append(errs, errors.New("cql.password_file: set without cql.username"))
	}
	if c.PasswordFile != "" && c.Password != "" {
		errs = append(errs, errors.New("cql.password_file: set with cql.password (give one of them)"))
	}
	return errors.Join(errs...)
}

// password returns the password: Password, or PasswordFile's contents
// without trailing line breaks.
func (c Config) password() (string, error) {
	if c.PasswordFile == "" {
		return c.Password, nil
	}
	b, err := os.ReadFile(c.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("cql.password_file: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// hostsPort checks the hosts and returns the port they name (0: none).
func hostsPort(hosts []string) (int, error) {
	port := 0
	var errs []error
	for i, h := range hosts {
		host, p := h, ""
		if strings.Contains(h, ":") {
			var err error
			if host, p, err = net.SplitHostPort(h); err != nil {
				errs = append(errs, fmt.Errorf("cql.hosts[%d]: %q: %w", i, h, err))
				continue
			}
		}
		if host == "" {
			errs = append(errs, fmt.Errorf("cql.hosts[%d]: %q has no host", i, h))
			continue
		}
		if p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			errs = append(errs, fmt.Errorf("cql.hosts[%d]: %q: port %q is not a number in 1..65535", i, h, p))
			continue
		}
		if port != 0 && n != port {
			errs = append(errs, fmt.Errorf("cql.hosts[%d]: %q: port %d differs from %d (every node listens on one native transport port)", i, h, n, port))
			continue
		}
		port = n
	}
	return port, errors.Join(errs...)
}

// serial returns the serial consistency that goes with the configured one.
func (c Config) serial() gocql.Consistency {
	if strings.HasPrefix(c.Consistency, "local_") {
		return gocql.LocalSerial
	}
	return gocql.Serial
}
