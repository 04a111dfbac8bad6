package sqlqueue

import (
	"strings"
	"testing"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
	"github.com/settlehq/settle/core/sqlqueue/internal/golden"
)

// hinting is pgLike with ByIDHints, spelled as MySQL pins the primary key.
type hinting struct{ pgLike }

func (hinting) UpdateByIDs(q string) string { return "UPDATE " + q + " FORCE INDEX (PRIMARY)" }
func (hinting) DeleteByIDs(q string) string {
	return "DELETE " + q + " FROM " + q + " FORCE INDEX (PRIMARY)"
}

// renderWith renders the statements of form f on table tb (group "g" where it has one) whose
// dead letter is the table dlRef, or the group "g.dead", spelled by d.
func renderWith(t *testing.T, d Dialect, f Form, tb Table, dlRef TableRef) []engine.Named {
	t.Helper()
	group := ""
	if tb.Columns.Group != "" {
		group = "g"
	}
	dest := "g.dead"
	if dlRef.Name != "" {
		dest = dlRef.Name
	}
	list, err := golden.Statements(d, f, tb, group, engine.Hints{}, core.DeadLetterAfter(3, dest))
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// byIDs are the statements that name many rows by id (… AND id IN (…)), which ByIDHints
// start.
var byIDs = map[string]bool{"doneMany": true, "doneIDs": true}

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
			if len(plain) != len(hint) {
				t.Fatalf("%v: %d statements without hints, %d with", f, len(plain), len(hint))
			}
			qtable := `"jobs"`
			if tb.Schema != "" {
				qtable = `"` + tb.Schema + `"."jobs"`
			}
			for i, p := range plain {
				h := hint[i]
				if !byIDs[p.Name] {
					if h.SQL != p.SQL {
						t.Errorf("%v %s changed by hints:\n got %s\nwant %s", f, p.Name, h.SQL, p.SQL)
					}
					continue
				}
				var want string
				switch {
				case strings.HasPrefix(p.SQL, "UPDATE "+qtable+" SET "):
					want = "UPDATE " + qtable + " FORCE INDEX (PRIMARY)" + strings.TrimPrefix(p.SQL, "UPDATE "+qtable)
				case strings.HasPrefix(p.SQL, "DELETE FROM "+qtable+" WHERE "):
					want = "DELETE " + qtable + " FROM " + qtable + " FORCE INDEX (PRIMARY)" + strings.TrimPrefix(p.SQL, "DELETE FROM "+qtable)
				default:
					t.Fatalf("%v %s: %s is not an UPDATE or DELETE of the queue table", f, p.Name, p.SQL)
				}
				if h.SQL != want {
					t.Errorf("%v %s:\n got %s\nwant %s", f, p.Name, h.SQL, want)
				}
				hinted++
			}
		}
	}
	if hinted == 0 {
		t.Fatal("no statement was hinted")
	}
}
