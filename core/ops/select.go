package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Filter selects dead letters by what they record. The zero Filter matches every dead letter;
// every set field must match.
type Filter struct {
	// Origin keeps dead letters that came from this queue.
	Origin string
	// Reason keeps dead letters whose reason contains this text (case-sensitive).
	Reason string
	// DeadBefore keeps dead letters moved before this time (dead letters that record no time
	// do not match).
	DeadBefore time.Time
	// DeadAfter keeps dead letters moved at or after this time (same).
	DeadAfter time.Time
}

// IsZero reports whether f matches everything.
func (f Filter) IsZero() bool {
	return f.Origin == "" && f.Reason == "" && f.DeadBefore.IsZero() && f.DeadAfter.IsZero()
}

// Match reports whether d is selected by f.
func (f Filter) Match(d DeadLetter) bool {
	switch {
	case f.Origin != "" && d.Origin != f.Origin:
		return false
	case f.Reason != "" && !strings.Contains(d.Reason, f.Reason):
		return false
	case !f.DeadBefore.IsZero() && (d.DeadAt.IsZero() || !d.DeadAt.Before(f.DeadBefore)):
		return false
	case !f.DeadAfter.IsZero() && (d.DeadAt.IsZero() || d.DeadAt.Before(f.DeadAfter)):
		return false
	}
	return true
}

// String describes f for messages: "origin=refunds reason~timeout", or "everything".
func (f Filter) String() string {
	var p []string
	if f.Origin != "" {
		p = append(p, "origin="+f.Origin)
	}
	if f.Reason != "" {
		p = append(p, fmt.Sprintf("reason~%q", f.Reason))
	}
	if !f.DeadBefore.IsZero() {
		p = append(p, "dead-before="+f.DeadBefore.UTC().Format(time.RFC3339))
	}
	if !f.DeadAfter.IsZero() {
		p = append(p, "dead-after="+f.DeadAfter.UTC().Format(time.RFC3339))
	}
	if len(p) == 0 {
		return "everything"
	}
	return strings.Join(p, " ")
}

// Selection names the dead letters Redrive or Purge act on: exactly one of a list of ids, a
// non-empty filter, or everything. Build one with IDs, Matching or All; the zero Selection
// selects nothing and is refused (ErrNoSelection), so that "everything" is never implied.
type Selection struct {
	// IDs are the dead letters' ids.
	IDs []string
	// Filter selects every dead letter it matches.
	Filter Filter
	// All selects every dead letter.
	All bool
}

// IDs selects the dead letters with these ids.
func IDs(ids ...string) Selection { return Selection{IDs: ids} }

// Matching selects every dead letter f matches; f must not be zero (use All).
func Matching(f Filter) Selection { return Selection{Filter: f} }

// All selects every dead letter.
func All() Selection { return Selection{All: true} }

// Validate refuses a selection that names nothing or more than one kind of thing.
func (s Selection) Validate() error {
	n := 0
	if len(s.IDs) > 0 {
		n++
		for _, id := range s.IDs {
			if id == "" {
				return fmt.Errorf("%w: an empty id", ErrNoSelection)
			}
		}
	}
	if !s.Filter.IsZero() {
		n++
	}
	if s.All {
		n++
	}
	switch n {
	case 0:
		return fmt.Errorf("%w: name ids, a filter or all", ErrNoSelection)
	case 1:
		return nil
	}
	return fmt.Errorf("%w: give ids, a filter or all, not several", ErrNoSelection)
}

// Match reports whether d is selected (for a valid selection).
func (s Selection) Match(d DeadLetter) bool {
	switch {
	case s.All:
		return true
	case len(s.IDs) > 0:
		for _, id := range s.IDs {
			if id == d.ID {
				return true
			}
		}
		return false
	}
	return s.Filter.Match(d)
}

// String describes s for messages.
func (s Selection) String() string {
	switch {
	case s.All:
		return "all dead letters"
	case len(s.IDs) > 0:
		return "ids " + strings.Join(s.IDs, ", ")
	case !s.Filter.IsZero():
		return "dead letters matching " + s.Filter.String()
	}
	return "nothing"
}

// ErrNoSelection is matched by the error of a Redrive or Purge whose Selection names nothing
// (or several kinds of thing at once).
var ErrNoSelection = errors.New("ops: no dead letters selected")

// ErrNotFound is matched (errors.Is) by a *NotFoundError.
var ErrNotFound = errors.New("ops: no such dead letter")

// NotFoundError names the dead-letter ids that are not in the dead letter.
type NotFoundError struct {
	// DeadLetter names where they were looked for.
	DeadLetter string
	// IDs are the ids not found.
	IDs []string
}

func (e *NotFoundError) Error() string {
	what := "dead letter " + e.IDs[0]
	if len(e.IDs) > 1 {
		what = "dead letters " + strings.Join(e.IDs, ", ")
	}
	return fmt.Sprintf("ops: %s not found in %s", what, e.DeadLetter)
}

// Is makes errors.Is(err, ErrNotFound) hold.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// ErrNoDeadLetter is matched by the error of a dead-letter operation on a target that names no
// dead letter.
var ErrNoDeadLetter = errors.New("ops: the target names no dead letter")

// ErrTargetNotFound is matched by the error of an operation whose queue, table or dead letter
// does not exist on the backend.
var ErrTargetNotFound = errors.New("ops: target not found")

// TargetError says which part of a target is missing; it matches ErrTargetNotFound.
type TargetError struct {
	// What names the missing thing: `table "jobs"`, `queue "refunds.dead"`.
	What string
	// Why says what the backend answered.
	Why string
}

func (e *TargetError) Error() string { return "ops: " + e.What + ": " + e.Why }

// Is makes errors.Is(err, ErrTargetNotFound) hold.
func (e *TargetError) Is(target error) bool { return target == ErrTargetNotFound }

// Collect reads q's dead letters matching f page after page, at most max of them (0: no bound).
// Listing large dead letters page by page (ListDead) keeps memory bounded.
func Collect(ctx context.Context, q Queue, f Filter, max int) ([]DeadLetter, error) {
	var out []DeadLetter
	p := Page{Limit: DefaultLimit}
	for {
		if max > 0 {
			p.Limit = min(DefaultLimit, max-len(out))
		}
		page, err := q.ListDead(ctx, f, p)
		if err != nil {
			return out, err
		}
		out = append(out, page.Items...)
		if page.Next == "" || (max > 0 && len(out) >= max) {
			return out, nil
		}
		p.After = page.Next
	}
}
