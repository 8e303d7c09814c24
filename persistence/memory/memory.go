// Package memory provides an in-process [persistence.Store], for tests,
// local runs and single-process services. It also provides [Cache], a
// bounded local cache of completed records that sits in front of any Store
// (Powertools' use_local_cache).
package memory

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/retrysafe/retrysafe/internal/wake"
	"github.com/retrysafe/retrysafe/persistence"
)

// Store is a concurrency-safe in-process [persistence.Store]. The zero
// value is ready to use, with the default [Options]. Records live only as
// long as the process. So a Store protects against retries within one
// process only. Use a shared store (DynamoDB, Redis) across Lambda
// execution environments.
type Store struct {
	mu      sync.Mutex
	records map[string]*persistence.Record
	unswept int // reservations since the last sweep
	every   int // reservations between sweeps; 0 means sweepEveryMin
	opts    Options
	watches wake.Set // Watch's, guarded by mu
}

// Options configures a [Store], in the style of the other stores' options:
// [New] takes functions that set them.
type Options struct {
	// MaxResponseSize, when positive, is the largest response the store
	// keeps. Larger ones are completed without their response, as a store
	// with an item size limit does (see [persistence.ErrResponseOmitted]).
	// Zero, the default, keeps responses of any size.
	MaxResponseSize int
}

// New returns an empty Store with the options that optFns set.
func New(optFns ...func(*Options)) *Store {
	s := &Store{}
	for _, fn := range optFns {
		fn(&s.opts)
	}
	return s
}

var (
	_ persistence.Store       = (*Store)(nil)
	_ persistence.LocalReader = (*Store)(nil)
	_ persistence.Admin       = (*Store)(nil)
	_ persistence.Notifier    = (*Store)(nil)
)

// Reservations sweep the store: they inspect records at random and drop
// those whose expiry (ExpiresAt) has passed, so that a long-running process
// does not keep every key forever. An in-progress record past its
// in-progress expiry stays until its own expiry, as in every store: its
// invocation may still be running late, and its completion must land
// unless another invocation has taken the key over. Sampling keeps the
// cost of a Put constant whatever the size of the store, as Redis does with
// its keys.
//
// A sweep inspects sweepSample records, every sweepEveryMin-th
// reservation while sweeps find expired records: four per reservation on
// average. Inspecting more records than are added bounds the share of expired
// ones: when a fraction f of the store has expired, a reservation drops 4f
// records on average and adds one, so the store settles with at most about
// a quarter of its records expired. The records are inspected in batches
// because starting a map iteration costs more than inspecting a record.
//
// A sweep that finds nothing expired doubles the interval, up to
// sweepEveryMax reservations, so that a store whose records are all live
// (an hour's expiry, and a process younger than that) does not keep paying
// for sweeps; the first sweep that finds an expired record goes back to
// sweepEveryMin.
const (
	sweepEveryMin = 16
	sweepEveryMax = 1024
	sweepSample   = 4 * sweepEveryMin
)

// Put implements persistence.Store: it applies over no record or one that
// is not live at now (docs/protocol.md, reserve).
func (s *Store) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.records[rec.Key]; ok && old.Live(now) {
		// One allocation for the error and its copy of the record.
		c := &conflict{existing: *old}
		c.err.Existing = &c.existing
		return &c.err
	}
	if s.records == nil {
		s.records = make(map[string]*persistence.Record)
	}
	interval := max(s.every, sweepEveryMin) // the zero Store starts at the minimum
	if s.unswept++; s.unswept >= interval {
		s.unswept = 0
		if s.sweep(now) > 0 {
			s.every = sweepEveryMin
		} else {
			s.every = min(2*interval, sweepEveryMax)
		}
	}
	s.records[rec.Key] = clone(rec)
	return nil
}

// Get implements persistence.Store.
func (s *Store) Get(ctx context.Context, key string) (*persistence.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.records[key]
	if !ok {
		return nil, persistence.ErrNotFound
	}
	rec := *old
	return &rec, nil
}

// ReadLocal implements persistence.LocalReader.
func (s *Store) ReadLocal(key string, now time.Time) *persistence.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.records[key]
	if !ok || old.Status != persistence.StatusCompleted || !old.Live(now) {
		return nil
	}
	rec := *old
	return &rec
}

// Update implements persistence.Store: it applies only to the caller's
// own in-progress record (docs/protocol.md).
func (s *Store) Update(ctx context.Context, rec *persistence.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	resp, omitted := rec.Response, false
	if limit := s.opts.MaxResponseSize; limit > 0 && len(resp) > limit {
		resp, omitted = nil, true
	}
	resp = bytes.Clone(resp)
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.records[rec.Key]
	switch {
	case !ok || old.Token != rec.Token:
		return persistence.ErrFenced // absent, or another call's record
	case old.Status == persistence.StatusCompleted && rec.Status == persistence.StatusCompleted:
		// The caller's own completion is there already: an earlier
		// attempt applied it (docs/protocol.md, done).
		if old.ResponseOmitted {
			return persistence.ErrResponseOmitted
		}
		return nil
	case old.Status != persistence.StatusInProgress:
		// Completed: a renewal applied late must not reopen it.
		return persistence.ErrFenced
	case rec.Status == persistence.StatusInProgress && old.InProgressExpiresAt.After(rec.InProgressExpiresAt):
		// A renewal never shortens the lease: an earlier renewal that
		// arrives after a later one changes nothing (docs/protocol.md).
		return nil
	}
	// The stored record is the store's own (Get and Put hand out copies),
	// so it is overwritten in place rather than replaced.
	*old = *rec
	old.Response = resp
	if omitted {
		old.ResponseOmitted = true
	}
	if rec.Status == persistence.StatusCompleted {
		s.watches.Wake(rec.Key, old)
	}
	if omitted {
		return persistence.ErrResponseOmitted
	}
	return nil
}

// Delete implements persistence.Store: it deletes only the caller's own
// in-progress record (docs/protocol.md).
func (s *Store) Delete(ctx context.Context, key, token string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.records[key]
	switch {
	case !ok:
		return nil // released already (docs/protocol.md, done)
	case old.Token != token || old.Status != persistence.StatusInProgress:
		// Another call's record, or the caller's own completed one: a
		// release applied late must not delete a result.
		return persistence.ErrFenced
	}
	delete(s.records, key)
	s.watches.Wake(key, nil)
	return nil
}

// Watch implements [persistence.Notifier]. It wakes the calls that wait
// for key through another Guard than its holder's, which share no flight.
// A completion's wake-up carries the completed record.
func (s *Store) Watch(ctx context.Context, key string) (woken <-chan *persistence.Record, stop func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	ch, _ := s.watches.Add(key)
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.watches.Remove(key, ch)
	}, nil
}

// List implements [persistence.Admin]. It calls page with the records
// whose key starts with keyPrefix, without their responses. It gives them
// in the order of their keys, pageSize at a time. A pageSize of 0 gives
// all in one page.
func (s *Store) List(ctx context.Context, keyPrefix string, pageSize int, page func([]*persistence.Record) error) error {
	if pageSize < 0 {
		return fmt.Errorf("memory: List: negative page size %d", pageSize)
	}
	s.mu.Lock()
	var recs []*persistence.Record
	for key, rec := range s.records {
		if strings.HasPrefix(key, keyPrefix) {
			c := *rec
			c.Response = nil
			recs = append(recs, &c)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(recs, func(a, b *persistence.Record) int { return strings.Compare(a.Key, b.Key) })
	if pageSize == 0 {
		pageSize = max(len(recs), 1)
	}
	for len(recs) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(pageSize, len(recs))
		if err := page(recs[:n]); err != nil {
			return err
		}
		recs = recs[n:]
	}
	return nil
}

// DeleteRecord deletes the record for seen.Key, but only if the stored
// record is still seen: the same status, owner token, expiry and
// in-progress expiry. It is the operator's release of docs/protocol.md,
// as the other stores' DeleteRecord methods are. It returns
// persistence.ErrNotFound when there is no record, and
// persistence.ErrChanged, deleting nothing, when the record is not seen
// any more.
func (s *Store) DeleteRecord(ctx context.Context, seen *persistence.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.records[seen.Key]
	switch {
	case !ok:
		return persistence.ErrNotFound
	case old.Status != seen.Status || old.Token != seen.Token ||
		!old.ExpiresAt.Equal(seen.ExpiresAt) || !old.InProgressExpiresAt.Equal(seen.InProgressExpiresAt):
		return persistence.ErrChanged
	}
	delete(s.records, seen.Key)
	s.watches.Wake(seen.Key, nil)
	return nil
}

// Len returns the number of records held, live or not.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}

// sweep inspects sweepSample records, from a random place in the map,
// drops those that have expired, and returns how many it dropped. s.mu
// must be held.
func (s *Store) sweep(now time.Time) (dropped int) {
	n := 0
	for key, rec := range s.records {
		if rec.ExpiresAt.Before(now) {
			delete(s.records, key)
			dropped++
		}
		if n++; n == sweepSample {
			break
		}
	}
	return dropped
}

type conflict struct {
	err      persistence.ConflictError
	existing persistence.Record
}

// clone copies rec and its response bytes, so that the store never shares
// memory that a caller may change. Records handed out share the stored bytes,
// which the store itself never changes.
func clone(rec *persistence.Record) *persistence.Record {
	c := *rec
	c.Response = bytes.Clone(rec.Response)
	return &c
}
