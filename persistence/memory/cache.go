package memory

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/retrysafe/retrysafe/persistence"
)

// Cache is a persistence.Store decorator that keeps completed records of
// another Store in a bounded in-process LRU cache (Powertools'
// use_local_cache). A retry that reaches the same warm Lambda execution
// environment is then answered without any request to the store.
//
// Only completed records are cached. They do not change until they expire,
// so serving them locally is safe. Expiry is checked on every read. A
// cached record is never served to a reservation whose payload hash
// differs from it. That reservation goes to the store, so payload
// mismatches are always decided on the stored record.
type Cache struct {
	store    persistence.Store
	capacity int

	mu      sync.Mutex
	order   *list.List // most recently used first; values are *persistence.Record
	entries map[string]*list.Element
}

var (
	_ persistence.Store       = (*Cache)(nil)
	_ persistence.LocalReader = (*Cache)(nil)
	_ persistence.Committer   = (*Cache)(nil)
	_ persistence.TxStore     = (*Cache)(nil)
)

// NewCache returns a Cache of at most capacity completed records in front
// of store. It panics if capacity is not positive or store is nil.
func NewCache(store persistence.Store, capacity int) *Cache {
	if store == nil {
		panic("memory: NewCache: nil store")
	}
	if capacity <= 0 {
		panic("memory: NewCache: capacity must be positive")
	}
	return &Cache{
		store:    store,
		capacity: capacity,
		order:    list.New(),
		entries:  make(map[string]*list.Element),
	}
}

// Len returns the number of cached records.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Put answers from the cache when it holds a live completed record for the
// key with a matching payload hash. Otherwise it asks the store. It caches
// the completed record that a conflict returns.
func (c *Cache) Put(ctx context.Context, rec *persistence.Record, now time.Time) error {
	if cached := c.lookup(rec.Key, now); cached != nil && (rec.PayloadHash == "" || cached.PayloadHash == rec.PayloadHash) {
		return &persistence.ConflictError{Existing: cached}
	}
	err := c.store.Put(ctx, rec, now)
	var conflict *persistence.ConflictError
	if errors.As(err, &conflict) && conflict.Existing != nil {
		c.remember(conflict.Existing)
	}
	return err
}

// ReadLocal implements persistence.LocalReader: it returns the live cached
// record for key, without asking the store.
func (c *Cache) ReadLocal(key string, now time.Time) *persistence.Record {
	return c.lookup(key, now)
}

// Get reads through to the store, and caches a completed record.
func (c *Cache) Get(ctx context.Context, key string) (*persistence.Record, error) {
	rec, err := c.store.Get(ctx, key)
	if err == nil {
		c.remember(rec)
	}
	return rec, err
}

// Update writes through to the store, and caches the record once it is
// completed.
func (c *Cache) Update(ctx context.Context, rec *persistence.Record) error {
	err := c.store.Update(ctx, rec)
	c.completed(rec, err)
	return err
}

// completed caches rec after the store wrote it, with err.
func (c *Cache) completed(rec *persistence.Record, err error) {
	switch {
	case err == nil:
		c.remember(rec)
	case errors.Is(err, persistence.ErrResponseOmitted):
		omitted := *rec
		omitted.Response, omitted.ResponseOmitted = nil, true
		c.remember(&omitted)
	default:
		c.forget(rec.Key)
	}
}

// Commit commits through to the store, which must be a
// persistence.Committer (persistence.Commits tells), and caches the record
// once it is completed.
func (c *Cache) Commit(ctx context.Context, rec *persistence.Record, writes []any) error {
	committer, ok := c.store.(persistence.Committer)
	if !ok {
		return fmt.Errorf("memory: Cache.Commit: the cached store, a %T, does not commit staged writes", c.store)
	}
	err := committer.Commit(ctx, rec, writes)
	c.completed(rec, err)
	return err
}

// BeginTx begins a transaction of the store, which must be a
// persistence.TxStore (persistence.Commits tells); its Commit caches the
// record once it is completed.
func (c *Cache) BeginTx(ctx context.Context, rec *persistence.Record) (context.Context, persistence.Tx, error) {
	txStore, ok := c.store.(persistence.TxStore)
	if !ok {
		return ctx, nil, fmt.Errorf("memory: Cache.BeginTx: the cached store, a %T, does not run transactions", c.store)
	}
	ctx, tx, err := txStore.BeginTx(ctx, rec)
	if err != nil {
		return ctx, nil, err
	}
	return ctx, cachedTx{tx, c}, nil
}

// cachedTx caches the record its commit completes.
type cachedTx struct {
	persistence.Tx
	c *Cache
}

func (t cachedTx) Commit(ctx context.Context, rec *persistence.Record) error {
	err := t.Tx.Commit(ctx, rec)
	t.c.completed(rec, err)
	return err
}

// Unwrap returns the store the Cache is in front of.
func (c *Cache) Unwrap() persistence.Store { return c.store }

// Delete forgets the key and deletes it from the store.
func (c *Cache) Delete(ctx context.Context, key, token string) error {
	c.forget(key)
	return c.store.Delete(ctx, key, token)
}

// lookup returns a copy of the live cached record for key, if any.
func (c *Cache) lookup(key string, now time.Time) *persistence.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return nil
	}
	rec := el.Value.(*persistence.Record)
	if !rec.Live(now) {
		c.order.Remove(el)
		delete(c.entries, key)
		return nil
	}
	c.order.MoveToFront(el)
	cp := *rec
	return &cp
}

func (c *Cache) remember(rec *persistence.Record) {
	if rec.Status != persistence.StatusCompleted {
		return
	}
	stored := clone(rec)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[rec.Key]; ok {
		el.Value = stored
		c.order.MoveToFront(el)
		return
	}
	c.entries[rec.Key] = c.order.PushFront(stored)
	if c.order.Len() > c.capacity {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.entries, oldest.Value.(*persistence.Record).Key)
	}
}

func (c *Cache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.order.Remove(el)
		delete(c.entries, key)
	}
}
