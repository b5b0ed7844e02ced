package views

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
	"github.com/shoal-mqtt/shoal/compose/replay"
	"github.com/shoal-mqtt/shoal/compose/store/cqlstore"
	"github.com/shoal-mqtt/shoal/compose/store/pebblestore"
	"github.com/shoal-mqtt/shoal/kafka"
	routersvc "github.com/shoal-mqtt/shoal/router-svc"
	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
)

// store is a view store as the services see it.
type store interface {
	routersvc.Store
	sessionsvc.Store
}

// openTimeout bounds connecting to Kafka and the CQL database: a
// deployment that does not answer is reported, not waited for.
const openTimeout = 20 * time.Second

// deployment is what a rebuild reads and writes: the log, the live views
// (opened for verify and swap only) and the target.
type deployment struct {
	o   Options
	cfg config.Config
	cat kafka.Catalogue
	log *slog.Logger

	client  *kafka.Client
	running bool // a `shoal all` holds the data directory

	live, target         store
	liveName, targetName string
	liveCQL, targetCQL   *cqlstore.Store // nil on Pebble
	pebbleLive           string          // directories, on Pebble
	pebbleTarget         string

	closers []func() error
}

func (d *deployment) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		if err := d.closers[i](); err != nil {
			d.log.Warn("close", "err", err)
		}
	}
	d.closers = nil
}

// open opens the log, the target and, for verify and swap, the live
// views. Errors name what could not be opened.
func open(ctx context.Context, o Options) (_ *deployment, err error) {
	cfg := o.Config
	d := &deployment{o: o, cfg: cfg, cat: cfg.Kafka.Catalogue(), log: o.Log}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	embeddedLog, pebbleViews := len(cfg.Kafka.Brokers) == 0, len(cfg.CQL.Hosts) == 0
	if embeddedLog || pebbleViews {
		fi, err := os.Stat(cfg.DataDir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("data directory %s does not exist", cfg.DataDir)
		case err != nil:
			return nil, fmt.Errorf("data directory: %w", err)
		case !fi.IsDir():
			return nil, fmt.Errorf("data directory %s is not a directory", cfg.DataDir)
		}
	}
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	if err := d.openLog(octx); err != nil {
		return nil, err
	}
	if pebbleViews {
		err = d.openPebble()
	} else {
		err = d.openCQL(octx)
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}

// openLog opens the embedded log of data_dir (attaching to the running
// `shoal all` that holds it, if one does) or connects to kafka.brokers,
// as shoal replay does.
func (d *deployment) openLog(ctx context.Context) error {
	l, err := replay.OpenAs(ctx, d.cfg, "shoal-views", d.log)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	d.closers = append(d.closers, l.Close)
	d.client, d.running = l.Client, l.Running
	d.cat = d.client.Catalogue() // the partition counts the log has
	return nil
}

// openPebble opens the target directory and, for verify and swap, the live
// view, which a running `shoal all` holds.
func (d *deployment) openPebble() error {
	d.pebbleLive = filepath.Join(d.cfg.DataDir, "views")
	d.liveName = d.pebbleLive
	if d.o.Verify || d.o.Swap {
		if d.running {
			return fmt.Errorf("shoal all is running on %s: --verify and --swap need it stopped (a rebuild alone works while it runs)", d.cfg.DataDir)
		}
		if _, err := os.Stat(d.pebbleLive); err != nil {
			return fmt.Errorf("live view: %w", err)
		}
		db, err := pebblestore.OpenWith(d.pebbleLive, pebblestore.Options{NoSync: true}, d.log)
		if err != nil {
			return fmt.Errorf("live view: %w", err)
		}
		d.live = db
		d.closers = append(d.closers, db.Close)
	}
	d.pebbleTarget = filepath.Join(d.cfg.DataDir, "views-rebuild-"+d.o.Now().UTC().Format("20060102T150405.000Z"))
	d.targetName = d.pebbleTarget
	// The rebuild syncs once, when it closes the store.
	db, err := pebblestore.OpenWith(d.pebbleTarget, pebblestore.Options{NoSync: true}, d.log)
	if err != nil {
		return fmt.Errorf("rebuilt view: %w", err)
	}
	d.target = db
	d.closers = append(d.closers, db.Close)
	return nil
}

// Keyspace suffixes of the rebuilt views and of the views --swap
// replaced.
const (
	rebuildSuffix  = "_rebuild"
	replacedSuffix = "_replaced"
)

// openCQL opens the live keyspace (which must exist) and the target
// keyspace, created when missing and emptied.
func (d *deployment) openCQL(ctx context.Context) error {
	live, err := cqlstore.OpenExisting(ctx, d.cfg.CQL, d.log)
	if err != nil {
		return fmt.Errorf("live views: %w", err)
	}
	d.closers = append(d.closers, live.Close)
	d.live, d.liveCQL, d.liveName = live, live, "keyspace "+live.Keyspace()
	tcfg := d.cfg.CQL
	tcfg.Keyspace += rebuildSuffix
	target, err := cqlstore.Open(ctx, tcfg, d.log)
	if err != nil {
		return fmt.Errorf("rebuilt views: %w", err)
	}
	d.closers = append(d.closers, target.Close)
	if err := target.TruncateViews(ctx); err != nil {
		return fmt.Errorf("rebuilt views: %w", err)
	}
	d.target, d.targetCQL, d.targetName = target, target, "keyspace "+target.Keyspace()
	return nil
}
