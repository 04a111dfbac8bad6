package sqlqueue

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/internal/sqltext"
)

// hinting is pgLike with ByIDHints, spelled as MySQL pins the primary key.
type hinting struct{ pgLike }

func (hinting) UpdateByIDs(q string) string { return "UPDATE " + q + " FORCE INDEX (PRIMARY)" }
func (hinting) DeleteByIDs(q string) string {
	return "DELETE " + q + " FROM " + q + " FORCE INDEX (PRIMARY)"
}

func renderWith(t *testing.T, d interface {
	LeaseDialect
	RowLockDialect
	AdvisoryDialect
}, f Form, tb Table, dlRef TableRef) *runtime {
	t.Helper()
	group := ""
	if tb.Columns.Group != "" {
		group = "g"
	}
	q, err := newQueue(f, d, stubDB{}, tb, group)
	if err != nil {
		t.Fatal(err)
	}
	q.lease, q.rowLock, q.adv = d, d, d
	dest := "g.dead"
	if dlRef.Name != "" {
		dest = dlRef.Name
	}
	rt := &runtime{q: q, s: q.schema, d: q.d, cfg: configOf(&core.Options{}), dlRef: dlRef,
		sub: core.Subscription{Options: &core.Options{DeadLetterTo: dest}}}
	if err := rt.render(); err != nil {
		t.Fatal(err)
	}
	return rt
}

// TestByIDHintsOnlyOnGroupedStatements renders every form on tables with and without group and
// processed_at columns, with and without ByIDHints: the statements naming many rows by id start
// with the dialect's heads, and every other statement is exactly what a dialect without hints
// gets.
func TestByIDHintsOnlyOnGroupedStatements(t *testing.T) {
	std := StandardTable("jobs")
	bare := StandardTable("jobs")
	bare.Schema = "app"
	bare.Columns.Group, bare.Columns.ProcessedAt = "", ""
	hinted := 0
	for _, tb := range []Table{std, bare} {
		dl := TableRef{}
		if tb.Columns.Group == "" {
			dl = TableRef{Name: "jobs_dead"}
		}
		for _, f := range []Form{FormLease, FormRowLock, FormAdvisory} {
			plain, hint := renderWith(t, pgLike{}, f, tb, dl), renderWith(t, hinting{}, f, tb, dl)
			pv, hv := reflect.ValueOf(plain.st), reflect.ValueOf(hint.st)
			for i := range pv.NumField() {
				name := pv.Type().Field(i).Name
				switch pf, hf := pv.Field(i), hv.Field(i); {
				case pf.Type() == reflect.TypeFor[*sqltext.InList]():
					// Unexported fields cannot be Interface()d; the pointers are read as they are.
					p, h := (*sqltext.InList)(unsafe.Pointer(pf.Pointer())), (*sqltext.InList)(unsafe.Pointer(hf.Pointer()))
					if p == nil {
						continue
					}
					for _, n := range []int{1, 3} {
						ps, hs := p.SQL(n), h.SQL(n)
						var want string
						switch {
						case strings.HasPrefix(ps, "UPDATE "+plain.s.QTable+" SET "):
							want = "UPDATE " + plain.s.QTable + " FORCE INDEX (PRIMARY)" + strings.TrimPrefix(ps, "UPDATE "+plain.s.QTable)
						case strings.HasPrefix(ps, "DELETE FROM "+plain.s.QTable+" WHERE "):
							want = "DELETE " + plain.s.QTable + " FROM " + plain.s.QTable + " FORCE INDEX (PRIMARY)" + strings.TrimPrefix(ps, "DELETE FROM "+plain.s.QTable)
						default:
							t.Fatalf("%v %s: %s is not an UPDATE or DELETE of the queue table", f, name, ps)
						}
						if hs != want {
							t.Errorf("%v %s(%d):\n got %s\nwant %s", f, name, n, hs, want)
						}
						hinted++
					}
				case pf.Kind() == reflect.String:
					if p, h := pf.String(), hf.String(); h != p {
						t.Errorf("%v %s changed by hints:\n got %s\nwant %s", f, name, h, p)
					}
				}
			}
		}
	}
	if hinted == 0 {
		t.Fatal("no statement was hinted")
	}
}
