package sqlqueuetest

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
	"github.com/settlehq/settle/core/sqlqueue/internal/engine"
	"github.com/settlehq/settle/core/sqlqueue/internal/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files of the SQL settle renders (sqlqueuetest.Golden)")

// Catalogue is what a dialect's catalogue answers about a table created with its own DDL, given
// to Golden instead of asked: golden files are rendered without a server.
type Catalogue struct {
	// ClaimHint is what the dialect's ClaimIndexHint answers for t (driver.ClaimIndex); nil for
	// a dialect without one.
	ClaimHint func(t sqlqueue.Table) string
	// GroupOrder is what GroupOrdered answers for a table with a group column
	// (driver.GroupOrder).
	GroupOrder bool
	// Schema is the schema (database) unqualified table names resolve to, which the canonical
	// name of the advisory keys carries (driver.TableIdentity).
	Schema string
}

// Shape is one table shape the golden files cover: a table, the queue's group in it, and its
// dead letter ("" for none).
type Shape struct {
	Name        string
	Table       sqlqueue.Table
	Group, Dead string
}

// Shapes are the table shapes of the golden files for form f: a group column or not,
// processed_at or delete, a dead-letter group or table, the optional columns present or not (the
// lease form always has locked_until).
func Shapes(f sqlqueue.Form) []Shape {
	std := sqlqueue.StandardTable("jobs")
	lastErr := std
	lastErr.Columns.LastError = "last_error"
	table := sqlqueue.StandardTable("jobs")
	table.Columns.Group, table.Columns.ProcessedAt, table.Columns.LastError = "", "", "last_error"
	minimal := sqlqueue.Table{Name: "jobs"}
	sparse := sqlqueue.Table{Name: "jobs", Columns: sqlqueue.Columns{Group: "grp", Attempt: "attempt"}}
	if f == sqlqueue.FormLease {
		minimal.Columns.LockedUntil = "locked_until"
		sparse.Columns.LockedUntil = "locked_until"
	}
	return []Shape{
		{"group_mark", std, "work", "dead"},
		{"group_mark_lasterror", lastErr, "work", "dead"},
		{"table_delete", table, "", "jobs_dead"},
		{"group_sparse", sparse, "work", "dead"},
		{"minimal", minimal, "", ""},
	}
}

// goldenVariant is a subscription option whose statements differ from the plain ones.
type goldenVariant struct {
	suffix string
	form   sqlqueue.Form
	opt    core.Option
}

var goldenVariants = []goldenVariant{
	{"", 0, nil},
	{"_counted", sqlqueue.FormRowLock, sqlqueue.CountAtClaim(true)},
	{"_key", sqlqueue.FormAdvisory, sqlqueue.AdvisoryKey("payload")},
}

// Golden renders every statement of every claim form d offers (a LeaseDialect,
// RowLockDialect, AdvisoryDialect), over every table shape of Shapes, and the publisher's
// INSERTs, and compares each with its file under dir (the dialect module's "testdata/golden"):
// "<form>_<shape>[_<variant>].sql" and "publish_<shape>.sql". Run the test with -update to write
// the files afresh: a change to the SQL settle runs is then a diff of them to review. No server
// is asked: c answers in the catalogue's place.
func Golden(t *testing.T, dir string, d driver.Dialect, c Catalogue) {
	t.Helper()
	files := map[string]string{}
	for _, f := range []sqlqueue.Form{sqlqueue.FormLease, sqlqueue.FormRowLock, sqlqueue.FormAdvisory} {
		if !offers(d, f) {
			continue
		}
		for _, sh := range Shapes(f) {
			for _, v := range goldenVariants {
				if v.form != 0 && v.form != f {
					continue
				}
				files[formName(f)+"_"+sh.Name+v.suffix+".sql"] = goldenText(t, d, f, sh, c, v.opt)
			}
		}
	}
	for _, sh := range Shapes(sqlqueue.FormLease) {
		list, err := golden.Publish(d, sh.Table, sh.Group)
		if err != nil {
			t.Fatalf("publisher of %s: %v", sh.Name, err)
		}
		files["publish_"+sh.Name+".sql"] = golden.Text(list)
	}
	compareGolden(t, dir, files)
}

// goldenText renders the statements of form f over shape sh with opt.
func goldenText(t *testing.T, d driver.Dialect, f sqlqueue.Form, sh Shape, c Catalogue, opt core.Option) string {
	t.Helper()
	var opts []core.Option
	if sh.Dead != "" {
		opts = append(opts, core.DeadLetterAfter(3, sh.Dead))
	}
	if opt != nil {
		opts = append(opts, opt)
	}
	h := engine.Hints{GroupOrder: c.GroupOrder, Keys: sh.Table.Ref().String()}
	if c.Schema != "" && sh.Table.Schema == "" {
		h.Keys = c.Schema + "." + sh.Table.Name
	}
	if c.ClaimHint != nil {
		h.ClaimHint = c.ClaimHint(sh.Table)
	}
	list, err := golden.Statements(d, f, sh.Table, sh.Group, h, opts...)
	if err != nil {
		t.Fatalf("%v on %s: %v", f, sh.Name, err)
	}
	return golden.Text(list)
}

// compareGolden compares files with those under dir, or writes them with -update; a file under
// dir that Golden does not render fails too (it would go stale unseen).
func compareGolden(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if *update {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading the golden files (go test -update writes them): %v", err)
	}
	for _, e := range entries {
		if _, ok := files[e.Name()]; !ok {
			t.Errorf("%s: no longer rendered (go test -update removes it)", filepath.Join(dir, e.Name()))
		}
	}
	for name, text := range files {
		want, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v (go test -update writes it)", name, err)
			continue
		}
		if string(want) != text {
			t.Errorf("%s differs from what the engine renders now (go test -update rewrites it; review the diff):\n%s", filepath.Join(dir, name), lineDiff(string(want), text))
		}
	}
}

// lineDiff lists the lines of want missing from got (-) and of got missing from want (+).
func lineDiff(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

// offers reports whether d has form f.
func offers(d driver.Dialect, f sqlqueue.Form) bool {
	switch f {
	case sqlqueue.FormLease:
		_, ok := d.(driver.LeaseDialect)
		return ok
	case sqlqueue.FormRowLock:
		_, ok := d.(driver.RowLockDialect)
		return ok
	}
	_, ok := d.(driver.AdvisoryDialect)
	return ok
}

// formName names form f in file names.
func formName(f sqlqueue.Form) string { return strings.ReplaceAll(f.String(), " ", "") }
