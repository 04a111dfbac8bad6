package core

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// HealthStatus is a component's health, as health checks spell it (the IETF health-check
// response format): pass, warn or fail.
type HealthStatus string

const (
	// HealthPass: the component works.
	HealthPass HealthStatus = "pass"
	// HealthWarn: the component works but reports trouble (a listener down while polling still
	// finds messages, a reconnection in progress that has not failed yet).
	HealthWarn HealthStatus = "warn"
	// HealthFail: the component cannot do its work.
	HealthFail HealthStatus = "fail"
)

// ComponentHealth is the health of one backend or subscription.
type ComponentHealth struct {
	// Name names the component: a backend's address or kind, a subscription's name.
	Name string `json:"name"`
	// Status is pass, warn or fail.
	Status HealthStatus `json:"status"`
	// State says what the component is doing in its own words: connected, reconnecting,
	// listener down, unreachable, running, stopped.
	State string `json:"state"`
	// Output is the last error, when there is one.
	Output string `json:"output,omitempty"`
	// ErrorAt is when Output happened.
	ErrorAt time.Time `json:"error_at,omitzero"`
	// SettledAt is a subscription's last settlement.
	SettledAt time.Time `json:"settled_at,omitzero"`
}

// HealthChecker is implemented by a Backend, or a subscription's Source, that can tell whether
// it is usable: a database pinged with a deadline, an AMQP connection that is up or
// reconnecting, a LISTEN connection that is down. CheckHealth must honour ctx's deadline.
type HealthChecker interface {
	CheckHealth(ctx context.Context) ComponentHealth
}

// Health is the App's health: every backend's and every subscription's.
type Health struct {
	// Status is fail when the App is not running or a component fails, warn when one warns.
	Status HealthStatus `json:"status"`
	// State is the App's: starting, running, stopping, stopped.
	State         string            `json:"state"`
	Backends      []ComponentHealth `json:"backends"`
	Subscriptions []ComponentHealth `json:"subscriptions"`
}

// DefaultHealthTimeout bounds the checks of one Health call when its context has no deadline.
const DefaultHealthTimeout = 2 * time.Second

// Health checks every backend (those that implement HealthChecker; the others are reported as
// pass with the state "unchecked") and every subscription, each bounded by ctx (or
// DefaultHealthTimeout when ctx has no deadline), concurrently.
func (a *App) Health(ctx context.Context) Health {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultHealthTimeout)
		defer cancel()
	}
	a.mu.Lock()
	backends, subs, state := a.backends, a.subs, a.state
	a.mu.Unlock()
	h := Health{State: state.String(), Backends: make([]ComponentHealth, len(backends)), Subscriptions: make([]ComponentHealth, len(subs))}
	var wg sync.WaitGroup
	for i, b := range backends {
		wg.Go(func() {
			name := fmt.Sprintf("%T", b)
			c := ComponentHealth{Name: name, Status: HealthPass, State: "unchecked"}
			if hc, ok := b.(HealthChecker); ok {
				c = hc.CheckHealth(ctx)
				if c.Name == "" {
					c.Name = name
				}
			}
			h.Backends[i] = c
		})
	}
	for i, s := range subs {
		wg.Go(func() { h.Subscriptions[i] = s.health(ctx, state) })
	}
	wg.Wait()
	h.Status = HealthPass
	if state != appRunning {
		h.Status = HealthFail
	}
	for _, c := range append(append([]ComponentHealth(nil), h.Backends...), h.Subscriptions...) {
		h.Status = worse(h.Status, c.Status)
	}
	return h
}

func worse(a, b HealthStatus) HealthStatus {
	rank := map[HealthStatus]int{HealthPass: 0, HealthWarn: 1, HealthFail: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// HealthHandler serves the App's health over HTTP as probes expect it, in the IETF health-check
// JSON shape (application/health+json):
//
//   - /livez: the process works — 200 unless the App has stopped or failed to start (503);
//   - /readyz: the App can take work — 200 when it runs and no backend or subscription fails,
//     503 otherwise, with every component's status, state and last error.
//
// Checks are bounded by DefaultHealthTimeout.
func HealthHandler(a *App) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		state := a.state
		a.mu.Unlock()
		st := HealthPass
		if state == appStopped {
			st = HealthFail
		}
		writeHealth(w, Health{Status: st, State: state.String()})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		writeHealth(w, a.Health(r.Context()))
	})
	return mux
}

func writeHealth(w http.ResponseWriter, h Health) {
	w.Header().Set("Content-Type", "application/health+json")
	w.Header().Set("Cache-Control", "no-store")
	if h.Status == HealthFail {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(h)
}

// appState is where an App is in its life.
type appState uint8

const (
	appNew appState = iota
	appStarting
	appRunning
	appStopping
	appStopped
)

func (s appState) String() string {
	switch s {
	case appNew:
		return "new"
	case appStarting:
		return "starting"
	case appRunning:
		return "running"
	case appStopping:
		return "stopping"
	}
	return "stopped"
}
