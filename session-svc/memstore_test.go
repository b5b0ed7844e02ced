package sessionsvc

import (
	"context"
	"sync"
)

// memStore is an in-memory Store for unit tests. failCommit, when set,
// makes CommitSessions fail without storing anything.
type memStore struct {
	mu         sync.Mutex
	parts      map[int32]*memPartition
	failCommit error
	commits    int
	lookups    int   // clients LoadClients looked for
	failLoad   error // LoadClients fails with it
}

type memPartition struct {
	offset   int64
	sessions map[clientKey]*Session
}

func newMemStore() *memStore { return &memStore{parts: make(map[int32]*memPartition)} }

func (m *memStore) LoadSessions(ctx context.Context, partition int32, fn func(*Session) error) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	p := m.parts[partition]
	var offset int64 = -1
	var copies []*Session
	if p != nil {
		offset = p.offset
		for _, s := range p.sessions {
			copies = append(copies, s.Clone())
		}
	}
	m.mu.Unlock()
	for _, s := range copies {
		if err := fn(s); err != nil {
			return 0, err
		}
	}
	return offset, nil
}

func (m *memStore) LoadClients(ctx context.Context, partition int32, clients []Client, fn func(*Session) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	m.lookups += len(clients)
	var found []*Session
	if p := m.parts[partition]; p != nil && m.failLoad == nil {
		for _, c := range clients {
			if s := p.sessions[clientKey{c.Tenant, c.ID}]; s != nil {
				found = append(found, s.Clone())
			}
		}
	}
	fail := m.failLoad
	m.mu.Unlock()
	if fail != nil {
		return fail
	}
	for _, s := range found {
		if err := fn(s); err != nil {
			return err
		}
	}
	return nil
}

func (m *memStore) CommitSessions(ctx context.Context, partition int32, offset int64, sessions []*Session) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failCommit != nil {
		return m.failCommit
	}
	m.commits++
	p := m.parts[partition]
	if p == nil {
		p = &memPartition{sessions: make(map[clientKey]*Session)}
		m.parts[partition] = p
	}
	for _, s := range sessions {
		p.sessions[clientKey{s.Tenant, s.ClientID}] = s.Clone()
	}
	p.offset = offset
	return nil
}

// setFailCommit makes the following commits fail with err (nil: succeed).
func (m *memStore) setFailCommit(err error) {
	m.mu.Lock()
	m.failCommit = err
	m.mu.Unlock()
}
