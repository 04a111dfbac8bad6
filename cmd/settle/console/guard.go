package console

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/settlehq/settle/core/ops"
)

// loopbackHosts are the host names a console always answers to.
var loopbackHosts = []string{"localhost", "127.0.0.1", "::1"}

// allowHosts sets the Host names the console answers to: the loopback names and hosts.
func (s *Server) allowHosts(hosts []string) error {
	s.hosts = map[string]bool{}
	for _, h := range loopbackHosts {
		s.hosts[h] = true
	}
	for _, h := range hosts {
		h = strings.ToLower(strings.TrimSpace(h))
		switch {
		case h == "*":
			s.hosts = nil
			return nil
		case h == "" || strings.ContainsAny(h, "/ ,"):
			return fmt.Errorf("console: allowed host %q is not a host name (give names without scheme or port: console.example.com, 10.0.0.5)", h)
		}
		s.hosts[strings.Trim(h, "[]")] = true
	}
	all := append([]string(nil), loopbackHosts...)
	for _, h := range hosts {
		h = strings.ToLower(strings.Trim(strings.TrimSpace(h), "[]"))
		if !slices.Contains(all, h) {
			all = append(all, h)
		}
	}
	s.o.AllowedHosts = all
	return nil
}

// hostAllowed reports whether a request's Host header (with or without its port) names this
// console. A page on another origin that rebinds its own name to 127.0.0.1 sends its own name
// here, and is refused.
func (s *Server) hostAllowed(hostport string) bool {
	if s.hosts == nil {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	return s.hosts[host]
}

// movedKept is how many redriven or purged dead-letter ids a console remembers per queue, to
// tell a repeated request (409) from an unknown id (404).
const movedKept = 4096

// movedSet remembers, per queue, the dead letters this console moved lately and how: a
// repeated redrive of one (a double click, a resubmitted form, a reload of the POST) finds the
// dead letter gone, and the backend can only say "not found".
type movedSet struct {
	mu    sync.Mutex
	limit int
	how   map[movedKey]string
	order []movedKey
}

type movedKey struct {
	queue int
	id    string
}

func newMovedSet(limit int) *movedSet {
	return &movedSet{limit: limit, how: map[movedKey]string{}}
}

// add records that the ids of queue q were moved (how: "redriven" or "purged").
func (m *movedSet) add(q int, how string, ids []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		k := movedKey{q, id}
		if _, ok := m.how[k]; !ok {
			m.order = append(m.order, k)
		}
		m.how[k] = how
	}
	for len(m.order) > m.limit {
		delete(m.how, m.order[0])
		m.order = m.order[1:]
	}
}

// all returns how every id was moved when this console moved all of them, else "".
func (m *movedSet) all(q int, ids []string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	how := ""
	for _, id := range ids {
		h, ok := m.how[movedKey{q, id}]
		if !ok {
			return ""
		}
		how = h
	}
	return how
}

// ErrUnavailable is matched by the error of a queue whose backend is down (the settle command's
// console targets wrap it): the console answers 503 Service Unavailable for it.
var ErrUnavailable = errors.New("console: the queue's backend is unavailable")

// changeStatus is the HTTP status of a failed redrive or purge of queue q and the error to
// show: 409 Conflict when the ids were not found because this console just moved them ("already
// redriven"), 404 when they are unknown, 503 when the backend is down, 500 for a backend failure.
func (s *Server) changeStatus(q int, err error) (int, error) {
	var nf *ops.NotFoundError
	switch {
	case errors.Is(err, ErrUnavailable):
		return http.StatusServiceUnavailable, err
	case !errors.As(err, &nf):
		return http.StatusInternalServerError, err
	}
	if how := s.moved.all(q, nf.IDs); how != "" {
		return http.StatusConflict, fmt.Errorf("already %s: %s (nothing was done)", how, strings.Join(nf.IDs, ", "))
	}
	return http.StatusNotFound, fmt.Errorf("%w (nothing was done)", err)
}
