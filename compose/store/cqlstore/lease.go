package cqlstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/gocql/gocql"
)

// Errors of the slot leases.
var (
	// ErrNoFreeSlot: every slot is held by a live lease of another owner.
	ErrNoFreeSlot = errors.New("no free gateway slot")
	// ErrSlotLost: the slot's lease belongs to another owner now.
	ErrSlotLost = errors.New("gateway slot lost to another owner")
)

// Bounds of the leases.
const (
	// acquireRounds bounds how often AcquireSlot reads the slots again
	// after losing the race for every free one it saw.
	acquireRounds = 5
	// maxLeaseTTL is the largest CQL TTL (20 years).
	maxLeaseTTL = 630720000 * time.Second
)

// slotState is what a (non-serial) read saw of one slot.
type slotState struct {
	slot  int32
	owner string // "" when free: expired, released or never claimed
	last  string // owner of the latest claim
}

// AcquireSlot claims a slot in [0, slots) for owner with a lease of ttl
// and returns it. It prefers, in this order: a slot owner holds already
// (its lease is renewed: a gateway restarted within its lease takes its
// slot back), a free slot owner claimed last (restarted after its lease
// expired), a slot never claimed, then a free slot another owner claimed
// last (released or expired). It returns ErrNoFreeSlot when every slot is
// held by a live lease of another owner. Each claim is a lightweight
// transaction (IF owner = null, or IF owner = <owner>), so two owners
// never both succeed for one slot.
//
// owner must be unique among live gateways (a host name or pod name): two
// processes claiming with one owner name share its slot. A claim whose
// outcome is unknown (a timeout) is settled with a serial read of the
// slot; after any other error, calling AcquireSlot again with the same
// owner is safe (a slot it got meanwhile is found first).
func (s *Store) AcquireSlot(ctx context.Context, slots int32, owner string, ttl time.Duration) (int32, error) {
	if slots < 1 {
		return -1, fmt.Errorf("acquire slot for %q: %d slots, want ≥ 1", owner, slots)
	}
	ttlS, err := checkLease(owner, ttl)
	if err != nil {
		return -1, fmt.Errorf("acquire slot for %q: %w", owner, err)
	}
	for range acquireRounds {
		states, err := s.readSlots(ctx, slots)
		if err != nil {
			return -1, fmt.Errorf("acquire slot for %q: %w", owner, err)
		}
		cands := candidates(states, owner)
		if len(cands) == 0 {
			return -1, fmt.Errorf("acquire slot for %q: all %d slots are held: %w", owner, slots, ErrNoFreeSlot)
		}
		for _, c := range cands {
			var ok bool
			var err error
			if c.owner == owner {
				ok, _, err = s.cas(ctx, s.session.Query(s.q.slotRenew, ttlS, owner, c.slot, owner))
			} else {
				ok, _, err = s.claim(ctx, c.slot, owner, ttlS)
			}
			if err != nil {
				return -1, fmt.Errorf("acquire slot %d for %q: %w", c.slot, owner, err)
			}
			if ok {
				s.log.Info("gateway slot acquired", "slot", c.slot, "owner", owner, "ttl", ttl,
					"previous_owner", c.last, "held_already", c.owner == owner)
				return c.slot, nil
			}
		}
	}
	return -1, fmt.Errorf("acquire slot for %q: lost the race for every free slot %d times: %w", owner, acquireRounds, ErrNoFreeSlot)
}

// RenewSlot keeps slot for owner for ttl from now: it extends owner's
// lease, or claims the slot when nobody holds it (never claimed, released,
// or expired: a gateway configured with a fixed slot takes it this way,
// waiting while another owner's lease lasts). It returns ErrSlotLost when
// another owner holds a live lease of the slot.
//
// A holder whose renewal came too late (see the package documentation on
// clocks) must still treat the slot as lost for the time in between:
// another owner may have held it meanwhile. An error other than
// ErrSlotLost leaves the outcome unknown: the lease lasts at least until
// the deadline of the last successful renewal; retry before it.
func (s *Store) RenewSlot(ctx context.Context, slot int32, owner string, ttl time.Duration) error {
	if slot < 0 {
		return fmt.Errorf("renew slot %d for %q: negative slot", slot, owner)
	}
	ttlS, err := checkLease(owner, ttl)
	if err != nil {
		return fmt.Errorf("renew slot %d for %q: %w", slot, owner, err)
	}
	ok, holder, err := s.cas(ctx, s.session.Query(s.q.slotRenew, ttlS, owner, slot, owner))
	if err != nil {
		return fmt.Errorf("renew slot %d for %q: %w", slot, owner, err)
	}
	if ok {
		return nil
	}
	if holder != "" {
		return fmt.Errorf("renew slot %d for %q: held by %q: %w", slot, owner, holder, ErrSlotLost)
	}
	ok, holder, err = s.claim(ctx, slot, owner, ttlS)
	if err != nil {
		return fmt.Errorf("renew slot %d for %q: claim the free slot: %w", slot, owner, err)
	}
	if !ok {
		return fmt.Errorf("renew slot %d for %q: claimed meanwhile by %q: %w", slot, owner, holder, ErrSlotLost)
	}
	s.log.Info("gateway slot was free, claimed", "slot", slot, "owner", owner, "ttl", ttl)
	return nil
}

// ReleaseSlot ends owner's lease of slot, so another owner can claim it
// at once. It returns ErrSlotLost when another owner holds the slot; a
// slot nobody holds is released already.
func (s *Store) ReleaseSlot(ctx context.Context, slot int32, owner string) error {
	if owner == "" {
		return fmt.Errorf("release slot %d: empty owner", slot)
	}
	ok, holder, err := s.cas(ctx, s.session.Query(s.q.slotRelease, slot, owner))
	if err != nil {
		return fmt.Errorf("release slot %d for %q: %w", slot, owner, err)
	}
	if !ok && holder != "" {
		return fmt.Errorf("release slot %d for %q: held by %q: %w", slot, owner, holder, ErrSlotLost)
	}
	if ok {
		s.log.Info("gateway slot released", "slot", slot, "owner", owner)
	}
	return nil
}

// SlotHolder returns the owner of slot's live lease ("" when none), read
// with serial consistency: the outcome of every lightweight transaction
// before it.
func (s *Store) SlotHolder(ctx context.Context, slot int32) (string, error) {
	var owner *string
	var last *string
	err := s.session.Query(s.q.slotRead, slot).Consistency(s.cfg.serial()).WithContext(ctx).Scan(&owner, &last)
	if errors.Is(err, gocql.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read slot %d: %w", slot, err)
	}
	return deref(owner), nil
}

// readSlots reads every slot below slots (a plain read: only a hint of
// which slots are free; claims decide).
func (s *Store) readSlots(ctx context.Context, slots int32) ([]slotState, error) {
	states := make([]slotState, slots)
	for i := range states {
		states[i].slot = int32(i)
	}
	iter := s.session.Query(s.q.slotsSelect).WithContext(ctx).Iter()
	var (
		slot        int32
		owner, last *string
	)
	for iter.Scan(&slot, &owner, &last) {
		if slot >= 0 && slot < slots {
			states[slot].owner, states[slot].last = deref(owner), deref(last)
		}
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("read slots: %w", err)
	}
	return states, nil
}

// candidates returns the slots owner may claim, best first (see
// AcquireSlot). Never-claimed and others' free slots are tried from a
// position that depends on owner, so gateways starting together mostly
// try different slots.
func candidates(states []slotState, owner string) []slotState {
	rank := func(st slotState) int {
		switch {
		case st.owner == owner:
			return 0
		case st.owner != "":
			return -1 // held by another owner
		case st.last == owner:
			return 1
		case st.last == "":
			return 2
		default:
			return 3
		}
	}
	n := int32(len(states))
	h := fnv.New32a()
	h.Write([]byte(owner))
	start := int32(h.Sum32() % uint32(max(n, 1)))
	var out []slotState
	for _, st := range states {
		if rank(st) >= 0 {
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b slotState) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare((a.slot-start+n)%n, (b.slot-start+n)%n))
	})
	return out
}

// checkLease checks owner and ttl and returns ttl in whole seconds,
// rounded up (the lease never ends earlier than asked).
func checkLease(owner string, ttl time.Duration) (int, error) {
	if owner == "" || !utf8.ValidString(owner) {
		return 0, fmt.Errorf("owner %q: want a non-empty UTF-8 name", owner)
	}
	if ttl < time.Second || ttl > maxLeaseTTL {
		return 0, fmt.Errorf("lease ttl %s: want between 1s and %s", ttl, maxLeaseTTL)
	}
	return int((ttl + time.Second - 1) / time.Second), nil
}

// claim claims slot for owner if nobody holds it: one conditional batch
// (owner with the lease's TTL IF owner = null; last_owner and claimed_at
// without TTL). It reports whether it did and, if not, the holder. The
// outcome of a claim that failed (a timeout under contention, say) is
// unknown: a serial read of the slot settles it, and since the slot was
// free, holding it then means this claim applied.
func (s *Store) claim(ctx context.Context, slot int32, owner string, ttlS int) (bool, string, error) {
	b := s.session.Batch(gocql.LoggedBatch).
		Query(s.q.slotClaim, ttlS, owner, slot).
		Query(s.q.slotClaimRecord, owner, time.Now(), slot)
	ok, holder, err := s.casBatch(ctx, b)
	if err == nil {
		// Not applied, yet held by owner: an earlier attempt of this
		// very claim applied (leaseRetry sent it again elsewhere).
		return ok || holder == owner, holder, nil
	}
	holder, rerr := s.SlotHolder(ctx, slot)
	if rerr != nil {
		return false, "", errors.Join(err, rerr)
	}
	s.log.Debug("slot claim failed, settled by a serial read", "slot", slot, "owner", owner, "holder", holder, "error", err)
	return holder == owner, holder, nil
}

// leaseRetry is the retry policy of the leases' lightweight transactions:
// up to leaseRetries more attempts, each on the next replica. The driver's
// own policy sends a lightweight transaction again to the same coordinator
// (ScyllaDB's advice, against Paxos contention), but a Cassandra
// coordinator whose failure detector has not yet convicted a replica that
// died times out every round for as long as it takes (about 10 s, measured
// on the fault suite's ring: gateways lost their leases), while another
// coordinator may already know. Sending a lease's statement twice is
// harmless: a renewal or release (IF owner = <owner>) applies the same way
// again, and a claim (IF owner = null) that finds its owner holding the
// slot applied at an earlier attempt (see claim).
var leaseRetry gocql.RetryPolicy = nextReplica{}

// leaseRetries bounds the attempts of a lease statement after the first.
const leaseRetries = 3

// nextReplica is leaseRetry's policy. It implements gocql.RetryPolicy only
// (not gocql.LWTRetryPolicy), so the driver applies it to lightweight
// transactions as it is.
type nextReplica struct{}

func (nextReplica) Attempt(q gocql.RetryableQuery) bool { return q.Attempts() <= leaseRetries }

func (nextReplica) GetRetryType(error) gocql.RetryType { return gocql.RetryNextHost }

// cas runs a conditional statement on owner columns and reports whether
// it applied and, if not, the current owner.
func (s *Store) cas(ctx context.Context, q *gocql.Query) (bool, string, error) {
	m := make(map[string]any)
	applied, err := q.WithContext(ctx).SerialConsistency(s.cfg.serial()).RetryPolicy(leaseRetry).MapScanCAS(m)
	if err != nil {
		return false, "", err
	}
	holder, _ := m["owner"].(string)
	return applied, holder, nil
}

// casBatch runs a conditional batch and reports whether it applied and,
// if not, the current owner.
func (s *Store) casBatch(ctx context.Context, b *gocql.Batch) (bool, string, error) {
	m := make(map[string]any)
	applied, iter, err := s.session.MapExecuteBatchCAS(b.WithContext(ctx).SerialConsistency(s.cfg.serial()).RetryPolicy(leaseRetry), m)
	if iter != nil {
		if cerr := iter.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}
	if err != nil {
		return false, "", err
	}
	holder, _ := m["owner"].(string)
	return applied, holder, nil
}

// Now returns the time of the coordinator that answers: a clock the
// database's nodes keep synchronized (NTP, as Cassandra and ScyllaDB
// require), which a gateway compares its own with each time it takes or
// renews its slot lease, to correct a clock that is off (gateway/clock.go).
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var ms int64
	if err := s.session.Query(s.q.clockNow).WithContext(ctx).Scan(&ms); err != nil {
		return time.Time{}, fmt.Errorf("read the database's clock: %w", err)
	}
	return time.UnixMilli(ms), nil
}
