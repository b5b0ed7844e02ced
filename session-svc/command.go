package sessionsvc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shoal-mqtt/shoal/internal/firstn"
	"github.com/shoal-mqtt/shoal/kafka"
	"github.com/shoal-mqtt/shoal/schemas/eventspb"
)

// What an operator's inspection and commands (shoal ctl, through the admin
// API that compose/admin serves) may find.
var (
	// ErrNotOwned: the client's partition of shoal.sessions is not loaded
	// by this instance (another session service owns it).
	ErrNotOwned = errors.New("the client's partition is not owned by this session service")
	// ErrNoSession: the client has no session (never connected, or its
	// session ended).
	ErrNoSession = errors.New("no session")
	// ErrNotConnected: the client has no connection to kick.
	ErrNotConnected = errors.New("not connected")
)

// Sessions returns a copy of every session (Active: connected, or a
// persistent session offline) of the partitions this instance owns now,
// of tenant or, with allTenants, of every tenant, sorted by tenant and
// client id. The copies are taken under each partition's lock from its
// committed state, so they never race with the partition's goroutine, and
// each is a state the session had after a batch; the batches under way are
// waited for first (settle, which ctx cuts short).
func (s *Service) Sessions(ctx context.Context, tenant string, allTenants bool) []*Session {
	out, _ := s.SessionsPage(ctx, tenant, allTenants, Page{})
	return out
}

// Page selects a page of the sessions: those after the key (AfterTenant,
// AfterClient) in the order of tenant and client id, whose client id
// holds Search in any case, Limit of them at most (0: all).
type Page struct {
	AfterTenant, AfterClient, Search string
	Limit                            int
}

// SessionsPage is Sessions for page p, and whether more follow it. The
// page's keys are picked (firstn: the least Limit of them, without sorting
// the rest) before any session is copied, so a page costs its own
// sessions' copies (the console lists 50 of 10,000).
func (s *Service) SessionsPage(ctx context.Context, tenant string, allTenants bool, p Page) ([]*Session, bool) {
	s.mu.Lock()
	parts := slices.Clone(s.parts)
	s.mu.Unlock()
	_ = settle(ctx, parts...) // ended: whoever asked is gone, the answer does not matter
	type entry struct {
		k    clientKey
		part *partition
	}
	search := strings.ToLower(p.Search)
	paged := p.AfterTenant != "" || p.AfterClient != ""
	keep := firstn.New(p.Limit, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.k.tenant, b.k.tenant), cmp.Compare(a.k.client, b.k.client))
	})
	for _, part := range parts {
		if part == nil {
			continue
		}
		part.mu.Lock()
		for k, sess := range part.sessions {
			if !sess.Active || (!allTenants && k.tenant != tenant) {
				continue
			}
			if paged && cmp.Or(cmp.Compare(k.tenant, p.AfterTenant), cmp.Compare(k.client, p.AfterClient)) <= 0 {
				continue
			}
			if search != "" && !strings.Contains(strings.ToLower(k.client), search) {
				continue
			}
			keep.Offer(entry{k, part})
		}
		part.mu.Unlock()
	}
	keys, more := keep.Result()
	out := make([]*Session, 0, len(keys))
	for _, e := range keys {
		// A session may have ended since its key was taken: skipped.
		if sess, ok := e.part.snapshot(e.k); ok && sess.Active {
			out = append(out, sess)
		}
	}
	return out, more
}

// Session returns a copy of the session of a client: ErrNotOwned when
// another instance owns its partition, ErrNoSession when it has none.
func (s *Service) Session(ctx context.Context, tenant, clientID string) (*Session, error) {
	k := clientKey{tenant, clientID}
	part := s.part(kafka.PartitionForKey(k.recordKey(), s.sessionsPartitions))
	if part == nil {
		return nil, ErrNotOwned
	}
	_ = settle(ctx, part) // ended: whoever asked is gone, the answer does not matter
	sess, ok := part.snapshot(k)
	if !ok || !sess.Active {
		return nil, ErrNoSession
	}
	return sess, nil
}

// Command writes an operator's SessionCommand about a client to
// shoal.sessions, for the partition's owner to apply in log order (the
// machine's command), once this instance's committed state says there is
// something to do: a connection to kick (ErrNotConnected otherwise), a
// session to delete (ErrNoSession). When it does not, and the client's
// partition is committing a batch, it waits for that batch and looks
// again: a client has its CONNACK before the batch that answered it is
// committed. reason is kept in the event for the
// audit. It returns once the command is durably in the log; the kick or
// the deletion follows within a consume round trip.
func (s *Service) Command(ctx context.Context, tenant, clientID string, op eventspb.SessionCommand_Op, reason string) error {
	sess, err := s.Session(ctx, tenant, clientID)
	if errors.Is(err, ErrNoSession) || (err == nil && op == eventspb.SessionCommand_OP_KICK && !sess.Online) {
		// The batch under way may hold what the client has seen already:
		// its CONNACK goes out once the answer is in the log, before the
		// batch is committed. Look again once it is.
		if err := s.awaitBatch(ctx, tenant, clientID); err != nil {
			return err
		}
		sess, err = s.Session(ctx, tenant, clientID)
	}
	switch {
	case err != nil:
		return err
	case op == eventspb.SessionCommand_OP_KICK && !sess.Online:
		return ErrNotConnected
	case op != eventspb.SessionCommand_OP_KICK && op != eventspb.SessionCommand_OP_DELETE_SESSION:
		return fmt.Errorf("session command: unknown op %v", op)
	}
	k := clientKey{tenant, clientID}
	env := &eventspb.Envelope{
		Tenant:      tenant,
		ClientId:    clientID,
		TimestampUs: s.m.now().UnixMicro(),
		Event:       &eventspb.Envelope_SessionCommand{SessionCommand: &eventspb.SessionCommand{Op: op, Reason: reason}},
	}
	rec := kafka.NewRecord(s.topics.Sessions.Name, k.recordKey(), kafka.PartitionByKey, env)
	if err := s.client.ProduceSync(ctx, rec); err != nil {
		return fmt.Errorf("write session command: %w", err)
	}
	s.log.Info("session command written", "op", op.String(), "tenant", tenant, "client", clientID, "reason", reason)
	return nil
}

// commandSettle bounds Command's wait for the batch under way.
const commandSettle = 2 * time.Second

// awaitBatch waits until the batch the client's partition is processing
// now, if any, is committed, for commandSettle at most.
func (s *Service) awaitBatch(ctx context.Context, tenant, clientID string) error {
	k := clientKey{tenant, clientID}
	return settle(ctx, s.part(kafka.PartitionForKey(k.recordKey(), s.sessionsPartitions)))
}

// settle waits until the batches partitions ps are processing now, if
// any, are committed, for commandSettle at most in all. A client has its
// CONNACK before the batch that answered it is committed (in `shoal all`
// even before the answer is produced): an operator's view and commands
// wait for that batch, so that they know every client already answered.
func settle(ctx context.Context, ps ...*partition) error {
	t := time.NewTimer(commandSettle)
	defer t.Stop()
	for _, p := range ps {
		if p == nil {
			continue
		}
		ch := p.batchUnderWay()
		if ch == nil {
			continue
		}
		select {
		case <-ch:
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
