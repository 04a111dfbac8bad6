// Package sqltext keeps the text of statements that name a list of rows ("… IN ($1, $2, …)"),
// rendered once for each length of the list and reused: the engine and the dialect helpers
// render every statement once, never per message.
package sqltext

import (
	"strings"
	"sync"
)

// InList renders "prefix p, p, … suffix" statements for each list length once and keeps them.
type InList struct {
	ph             func(n int) string
	prefix, suffix string
	first          int // number of the first list placeholder
	ByCount
}

// NewInList returns the statement prefix + n placeholders (numbered from first by ph) + suffix.
func NewInList(ph func(n int) string, prefix, suffix string, first int) *InList {
	return &InList{ph: ph, prefix: prefix, suffix: suffix, first: first}
}

// SQL returns the statement for n list items.
func (l *InList) SQL(n int) string {
	return l.Get(n, func(n int) string {
		var sb strings.Builder
		sb.WriteString(l.prefix)
		for i := range n {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(l.ph(l.first + i))
		}
		sb.WriteString(l.suffix)
		return sb.String()
	})
}

// ByCount keeps a statement rendered for each number of list items, built once.
type ByCount struct {
	mu    sync.Mutex
	cache []string
}

// Get returns the statement for n items, built by build the first time.
func (c *ByCount) Get(n int, build func(n int) string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n < len(c.cache) && c.cache[n] != "" {
		return c.cache[n]
	}
	for len(c.cache) <= n {
		c.cache = append(c.cache, "")
	}
	c.cache[n] = build(n)
	return c.cache[n]
}
