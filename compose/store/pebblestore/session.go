package pebblestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
)

// The session service's namespace and tables:
//
//	's' 'o' partition                → offset of the last record of shoal.sessions applied (8-byte big-endian int64)
//	's' 'c' partition tenant client  → session (sessionsvc.AppendSessionRow, session-svc/row.go)
//
// partition: 4-byte big-endian (one partition's rows are one key range);
// tenant: length-prefixed (unsigned varint, then the bytes); client: the
// rest of the key. The partition is the one of shoal.sessions that the
// client's key (tenant/client) hashes to.
const (
	nsSession           = 's'
	tableSessionOffset  = 'o'
	tableSessionClients = 'c'
)

var _ sessionsvc.Store = (*DB)(nil)

// sessionTablePrefix appends the key prefix of a session table's rows of
// one partition.
func sessionTablePrefix(dst []byte, table byte, partition int32) []byte {
	dst = append(dst, nsSession, table)
	return binary.BigEndian.AppendUint32(dst, uint32(partition))
}

func sessionKey(dst []byte, partition int32, tenant, client string) []byte {
	dst = sessionTablePrefix(dst, tableSessionClients, partition)
	dst = appendPart(dst, tenant)
	return append(dst, client...)
}

// parseSessionKey returns the tenant and client of a session key.
func parseSessionKey(key []byte) (tenant, client string, err error) {
	const prefixLen = 2 + 4
	if len(key) < prefixLen {
		return "", "", fmt.Errorf("session key %x too short", key)
	}
	rest := key[prefixLen:]
	n, w := binary.Uvarint(rest)
	if w <= 0 || n > uint64(len(rest)-w) {
		return "", "", fmt.Errorf("session key %x: bad tenant length", key)
	}
	rest = rest[w:]
	return string(rest[:n]), string(rest[n:]), nil
}

// LoadSessions implements sessionsvc.Store: the offset and the sessions
// are read through one Pebble snapshot, so they are consistent.
func (d *DB) LoadSessions(ctx context.Context, partition int32, fn func(*sessionsvc.Session) error) (offset int64, err error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("load sessions of partition %d: %w", partition, err)
	}
	snap := d.db.NewSnapshot()
	defer snap.Close() //nolint:errcheck // closing a read snapshot; nothing to do on error

	offset = -1
	v, closer, err := snap.Get(sessionTablePrefix(nil, tableSessionOffset, partition))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return 0, fmt.Errorf("load sessions of partition %d: read offset: %w", partition, err)
	default:
		n := len(v)
		if n == 8 {
			offset = int64(binary.BigEndian.Uint64(v))
		}
		if err := closer.Close(); err != nil {
			return 0, fmt.Errorf("load sessions of partition %d: read offset: %w", partition, err)
		}
		if n != 8 {
			return 0, fmt.Errorf("load sessions of partition %d: offset value of %d bytes", partition, n)
		}
	}

	prefix := sessionTablePrefix(nil, tableSessionClients, partition)
	it, err := snap.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return 0, fmt.Errorf("load sessions of partition %d: iterate: %w", partition, err)
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("load sessions of partition %d: iterate: %w", partition, cerr)
		}
	}()
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("load sessions of partition %d: %w", partition, err)
		}
		tenant, client, err := parseSessionKey(it.Key())
		if err != nil {
			return 0, fmt.Errorf("load sessions of partition %d: %w", partition, err)
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return 0, fmt.Errorf("load sessions of partition %d: read %q/%q: %w", partition, tenant, client, err)
		}
		s := &sessionsvc.Session{Tenant: tenant, ClientID: client}
		if err := sessionsvc.DecodeSessionRow(v, s); err != nil { // copies: v is valid until Next
			return 0, fmt.Errorf("load sessions of partition %d: decode %q/%q: %w", partition, tenant, client, err)
		}
		if err := fn(s); err != nil {
			return 0, err
		}
	}
	if err := it.Error(); err != nil {
		return 0, fmt.Errorf("load sessions of partition %d: iterate: %w", partition, err)
	}
	return offset, nil
}

// LocalReads tells the session service that reads take microseconds here
// (it keeps no ended session in memory by default).
func (d *DB) LocalReads() bool { return true }

// LoadClients implements sessionsvc.Store: a point read per client, one
// after another (each a few microseconds, the bloom filters answering for
// most clients never seen), safe beside the partition's other calls
// (Pebble reads see whole batches).
func (d *DB) LoadClients(ctx context.Context, partition int32, clients []sessionsvc.Client, fn func(*sessionsvc.Session) error) error {
	var key []byte
	for _, c := range clients {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("load sessions of partition %d: %w", partition, err)
		}
		key = sessionKey(key[:0], partition, c.Tenant, c.ID)
		v, closer, err := d.db.Get(key)
		switch {
		case errors.Is(err, pebble.ErrNotFound):
			continue
		case err != nil:
			return fmt.Errorf("load session %q/%q of partition %d: %w", c.Tenant, c.ID, partition, err)
		}
		s := &sessionsvc.Session{Tenant: c.Tenant, ClientID: c.ID}
		err = sessionsvc.DecodeSessionRow(v, s) // copies: v is valid until closer.Close
		if cerr := closer.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("load session %q/%q of partition %d: %w", c.Tenant, c.ID, partition, err)
		}
		if err := fn(s); err != nil {
			return err
		}
	}
	return nil
}

// CommitSessions implements sessionsvc.Store: one batch, committed with the
// store's write options (see Options.NoSync).
func (d *DB) CommitSessions(ctx context.Context, partition int32, offset int64, sessions []*sessionsvc.Session) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("commit sessions of partition %d: %w", partition, err)
	}
	b := d.db.NewBatch()
	defer b.Close() //nolint:errcheck // Close only recycles the batch's memory

	var key, val []byte
	for _, s := range sessions {
		key = sessionKey(key[:0], partition, s.Tenant, s.ClientID)
		val = sessionsvc.AppendSessionRow(val[:0], s)
		if err := b.Set(key, val, nil); err != nil { // Set copies key and value
			return fmt.Errorf("commit sessions of partition %d: %q/%q: %w", partition, s.Tenant, s.ClientID, err)
		}
	}
	key = sessionTablePrefix(key[:0], tableSessionOffset, partition)
	if err := b.Set(key, binary.BigEndian.AppendUint64(nil, uint64(offset)), nil); err != nil {
		return fmt.Errorf("commit sessions of partition %d: offset: %w", partition, err)
	}
	if err := d.commit(b); err != nil {
		return fmt.Errorf("commit sessions of partition %d: %w", partition, err)
	}
	return nil
}
