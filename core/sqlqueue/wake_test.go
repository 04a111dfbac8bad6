package sqlqueue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
)

// TestWakeEntriesReleased: the process's registry of wake-ups holds an entry per queue while a
// subscription of it is open, and none once every subscription is closed, whichever form:
// 20 databases × 10 groups opened and closed leave no entry behind to pin their pools.
func TestWakeEntriesReleased(t *testing.T) {
	before := engine.WakeEntries()
	type open struct {
		src core.Source
	}
	var opened []open
	ctors := []func(db *memDB, group string) (core.Endpoint, error){
		func(db *memDB, g string) (core.Endpoint, error) {
			return NewLease(memDialect{}, db, overheadTable(), g)
		},
		func(db *memDB, g string) (core.Endpoint, error) {
			return NewRowLock(memRowLock{}, db, overheadTable(), g)
		},
		func(db *memDB, g string) (core.Endpoint, error) {
			return NewAdvisory(memDialect{}, db, overheadTable(), g)
		},
	}
	for i := range 20 {
		db := &memDB{}
		for g := range 10 {
			ep, err := ctors[(i+g)%len(ctors)](db, fmt.Sprintf("g%d", g))
			if err != nil {
				t.Fatal(err)
			}
			sub := core.Subscription{Name: "q", Options: &core.Options{Workers: 1}, Logger: discardLogger(), Clock: clock.NewVirtual(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
			src, _, err := ep.Open(context.Background(), sub)
			if err != nil {
				t.Fatal(err)
			}
			opened = append(opened, open{src})
		}
	}
	if got := engine.WakeEntries() - before; got != 200 {
		t.Errorf("200 subscriptions of 200 queues open: %d wake-up entries; want 200", got)
	}
	for _, o := range opened {
		if err := o.src.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := engine.WakeEntries() - before; got != 0 {
		t.Errorf("every subscription closed: %d wake-up entries left; want 0", got)
	}
}
