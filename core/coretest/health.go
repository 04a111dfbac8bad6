package coretest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
)

// Readyz asks the App's readiness probe (core.HealthHandler's /readyz) once and returns its
// status code and health.
func Readyz(t testing.TB, app *core.App) (int, core.Health) {
	t.Helper()
	rec := httptest.NewRecorder()
	core.HealthHandler(app).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var h core.Health
	if err := json.Unmarshal(rec.Body.Bytes(), &h); err != nil {
		t.Fatalf("/readyz answered %d with %q: %v", rec.Code, rec.Body.String(), err)
	}
	return rec.Code, h
}

// WaitReadyz asks /readyz, as a probe does, every 20 ms until it answers code and ok accepts
// its health (nil: any), and returns that health. It fails the test after WaitTimeout, showing
// the last answer. Backends use it to see a cut connection fail the probe and a restored one
// pass it.
func WaitReadyz(t testing.TB, app *core.App, code int, ok func(core.Health) bool) core.Health {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		got, h := Readyz(t, app)
		if got == code && (ok == nil || ok(h)) {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still answers %d %+v after %v; want %d", got, h, WaitTimeout, code)
		}
		<-tick.C
	}
}

// Backend returns the health of the App's backend whose name contains name, from h.
func Backend(h core.Health, name string) (core.ComponentHealth, bool) {
	for _, b := range h.Backends {
		if strings.Contains(b.Name, name) {
			return b, true
		}
	}
	return core.ComponentHealth{}, false
}
