package policy

import (
	"container/list"
	"sync"
)

// lru is a cache bounded in entries and in estimated bytes, least recently
// used first out. Safe for concurrent use.
type lru[K comparable, V any] struct {
	mu       sync.Mutex
	entries  int
	maxBytes int64
	bytes    int64
	order    list.List // of *lruEntry, most recent first
	byKey    map[K]*list.Element
}

type lruEntry[K comparable, V any] struct {
	key   K
	val   V
	bytes int64
}

func newLRU[K comparable, V any](entries int, maxBytes int64) *lru[K, V] {
	return &lru[K, V]{entries: entries, maxBytes: maxBytes, byKey: make(map[K]*list.Element, min(max(entries, 0), 1024))}
}

func (c *lru[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey)
}

func (c *lru[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*lruEntry[K, V]).val, true
}

// put keeps v under k unless k is kept already or v alone is over the
// bounds, then drops the least recently used until within them.
func (c *lru[K, V]) put(k K, v V, size int64) {
	if c.entries <= 0 || size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[k]; ok {
		return
	}
	c.byKey[k] = c.order.PushFront(&lruEntry[K, V]{key: k, val: v, bytes: size})
	c.bytes += size
	for len(c.byKey) > c.entries || c.bytes > c.maxBytes {
		old := c.order.Back()
		e := old.Value.(*lruEntry[K, V])
		c.order.Remove(old)
		delete(c.byKey, e.key)
		c.bytes -= e.bytes
	}
}
