package replay

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/shoal-mqtt/shoal/compose/config"
	"github.com/shoal-mqtt/shoal/kafka"
)

// Log is an open event log and how to close it.
type Log struct {
	*kafka.Client
	// Where says what was opened, for messages: "the running shoal all in
	// DIR", "the stopped shoal all in DIR" or the brokers.
	Where string
	// Running is set when the log is a running shoal all's, reached
	// through its socket (its data directory is that process's).
	Running bool
	closer  func() error
}

// Close closes the client and whatever Open started.
func (l *Log) Close() error {
	l.Client.Close()
	if l.closer != nil {
		return l.closer()
	}
	return nil
}

// connectTimeout bounds how long Open waits for the log to answer.
const connectTimeout = 15 * time.Second

// Open reaches the log cfg names: the Kafka cluster of kafka.brokers, or
// else the embedded backbone in data_dir, through the socket of the `shoal
// all` that runs there or, when none does, by opening its files here
// (nothing is written to them but what the embedded broker writes when it
// starts and stops). It never creates a data directory.
func Open(ctx context.Context, cfg config.Config, log *slog.Logger) (*Log, error) {
	return OpenAs(ctx, cfg, "shoal-replay", log)
}

// OpenAs is Open for a tool that names itself clientID to the brokers.
func OpenAs(ctx context.Context, cfg config.Config, clientID string, log *slog.Logger) (*Log, error) {
	kcfg := kafka.Config{Brokers: cfg.Kafka.Brokers, ClientID: clientID, Catalogue: cfg.Kafka.Catalogue(),
		AdoptPartitions: cfg.Kafka.AdoptPartitions()}
	l := &Log{Where: fmt.Sprintf("kafka %v", cfg.Kafka.Brokers)}
	if len(cfg.Kafka.Brokers) > 0 {
		var err error
		if kcfg.SASL, kcfg.TLS, err = cfg.Kafka.Security(); err != nil {
			return nil, err
		}
	} else {
		dir := filepath.Join(cfg.DataDir, "kafka")
		if _, err := os.Stat(dir); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("no Shoal data directory at %s (it has no kafka/): give --data-dir, or --kafka-brokers for a cluster", cfg.DataDir)
			}
			return nil, fmt.Errorf("data directory %s: %w", cfg.DataDir, err)
		}
		emb, err := kafka.StartEmbedded(kafka.EmbeddedConfig{Dir: dir}, log)
		switch {
		case err == nil:
			kcfg = emb.ClientConfig(kcfg)
			l.Where, l.closer = "the stopped shoal all in "+cfg.DataDir, emb.Close
		case errors.Is(err, kafka.ErrDirInUse):
			att, aerr := kafka.AttachEmbedded(dir)
			if aerr != nil {
				return nil, fmt.Errorf("a shoal all runs in %s, but: %w", cfg.DataDir, aerr)
			}
			att.ClientID, att.Catalogue, att.AdoptPartitions = kcfg.ClientID, kcfg.Catalogue, kcfg.AdoptPartitions
			kcfg = att
			l.Where, l.Running = "the running shoal all in "+cfg.DataDir, true
		default:
			return nil, fmt.Errorf("open the log in %s: %w", cfg.DataDir, err)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	client, err := kafka.NewClient(cctx, kcfg, log)
	if err != nil {
		if l.closer != nil {
			err = errors.Join(err, l.closer())
		}
		return nil, fmt.Errorf("reach %s: %w", l.Where, err)
	}
	l.Client = client
	return l, nil
}
