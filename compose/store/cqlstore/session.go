package cqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/gocql/gocql"

	sessionsvc "github.com/shoal-mqtt/shoal/session-svc"
)

var _ sessionsvc.Store = (*Store)(nil)

// LoadSessions implements sessionsvc.Store: one paged read of the
// partition's sessions table partition. The service is the partition's
// only writer, so the pages are consistent with each other and with the
// offset.
func (s *Store) LoadSessions(ctx context.Context, partition int32, fn func(*sessionsvc.Session) error) (int64, error) {
	iter := s.session.Query(s.q.sessSelect, partition).WithContext(ctx).PageSize(loadPageSize).Iter()
	offset := int64(-1)
	maxTS := int64(0)
	var (
		tenant, client    *string
		row               []byte
		off, rowTS, offTS *int64
	)
	for iter.Scan(&tenant, &client, &row, &off, &rowTS, &offTS) {
		if off != nil {
			offset = *off
		}
		if offTS != nil {
			maxTS = max(maxTS, *offTS)
		}
		if rowTS != nil {
			maxTS = max(maxTS, *rowTS)
		}
		if client == nil { // the partition's static row: the offset only
			continue
		}
		sess := &sessionsvc.Session{Tenant: deref(tenant), ClientID: *client}
		err := sessionsvc.DecodeSessionRow(row, sess) // copies: row is reused by the next Scan
		if err != nil {
			err = fmt.Errorf("decode %q/%q: %w", sess.Tenant, sess.ClientID, err)
		} else {
			err = fn(sess)
		}
		if err != nil {
			_ = iter.Close() // the load fails with err anyway
			return 0, fmt.Errorf("load sessions of partition %d: %w", partition, err)
		}
	}
	if err := iter.Close(); err != nil {
		return 0, fmt.Errorf("load sessions of partition %d: %w", partition, err)
	}
	s.stamps.observe(stampKey{'s', partition}, maxTS)
	return offset, nil
}

// loadConcurrency bounds the reads LoadClients runs at once.
const loadConcurrency = 16

// LoadClients implements sessionsvc.Store: one read of a row of the
// partition's sessions table partition per client (by its whole primary
// key), up to loadConcurrency at a time, so that the clients of a batch
// cost about one round trip to the database, not one each.
func (s *Store) LoadClients(ctx context.Context, partition int32, clients []sessionsvc.Client, fn func(*sessionsvc.Session) error) error {
	found := make([]*sessionsvc.Session, len(clients))
	errs := make([]error, len(clients))
	read := func(i int) {
		c := clients[i]
		var row []byte
		err := s.session.Query(s.q.sessGet, partition, c.Tenant, c.ID).WithContext(ctx).Scan(&row)
		switch {
		case errors.Is(err, gocql.ErrNotFound):
			return
		case err != nil:
			errs[i] = fmt.Errorf("load session %q/%q of partition %d: %w", c.Tenant, c.ID, partition, err)
			return
		}
		sess := &sessionsvc.Session{Tenant: c.Tenant, ClientID: c.ID}
		if err := sessionsvc.DecodeSessionRow(row, sess); err != nil {
			errs[i] = fmt.Errorf("load session %q/%q of partition %d: %w", c.Tenant, c.ID, partition, err)
			return
		}
		found[i] = sess
	}
	if len(clients) == 1 {
		read(0)
	} else {
		var wg sync.WaitGroup
		sem := make(chan struct{}, loadConcurrency)
		for i := range clients {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				read(i)
			})
		}
		wg.Wait()
	}
	for _, err := range errs {
		if err != nil {
			return err // the first: with the database down, they all say the same
		}
	}
	for _, sess := range found {
		if sess == nil {
			continue
		}
		if err := fn(sess); err != nil {
			return err
		}
	}
	return nil
}

// CommitSessions implements sessionsvc.Store: every session and the
// offset in one unlogged batch to the partition's single CQL partition,
// applied atomically and in isolation. It is never split (see the package
// documentation): a commit bigger than the server accepts (16 MiB by
// default) fails as a whole.
func (s *Store) CommitSessions(ctx context.Context, partition int32, offset int64, sessions []*sessionsvc.Session) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("commit sessions of partition %d: %w", partition, err)
	}
	if len(sessions)+1 > maxBatchStatements {
		return fmt.Errorf("commit sessions of partition %d: %d sessions, at most %d fit in one batch", partition, len(sessions), maxBatchStatements-1)
	}
	rows, size := encodeSessions(sessions)
	for _, ss := range sessions {
		if !utf8.ValidString(ss.Tenant) || !utf8.ValidString(ss.ClientID) {
			return fmt.Errorf("commit sessions of partition %d: %q/%q: not valid UTF-8", partition, ss.Tenant, ss.ClientID)
		}
	}
	k := stampKey{'s', partition}
	if err := s.learnStamp(ctx, k); err != nil {
		return fmt.Errorf("commit sessions of partition %d: %w", partition, err)
	}
	b := s.session.Batch(gocql.UnloggedBatch).WithContext(ctx).WithTimestamp(s.stamps.next(k))
	for i, ss := range sessions {
		b.Query(s.q.sessUpsert, partition, ss.Tenant, ss.ClientID, rows[i], int64(ss.Generation), ss.Online)
	}
	b.Query(s.q.sessOffset, offset, partition)
	if err := s.session.ExecuteBatch(b); err != nil {
		return fmt.Errorf("commit %d sessions (%d bytes) of partition %d at offset %d: %w", len(sessions), size, partition, offset, err)
	}
	return nil
}

// encodeSessions encodes every session's row into one buffer and returns
// the rows (never nil: a nil value would be a null) and their total size.
func encodeSessions(sessions []*sessionsvc.Session) ([][]byte, int) {
	buf := make([]byte, 0, 128*len(sessions)+1)
	ends := make([]int, len(sessions))
	for i, ss := range sessions {
		buf = sessionsvc.AppendSessionRow(buf, ss)
		ends[i] = len(buf)
	}
	rows := make([][]byte, len(sessions))
	start := 0
	for i, end := range ends {
		rows[i] = buf[start:end:end]
		start = end
	}
	return rows, len(buf)
}
