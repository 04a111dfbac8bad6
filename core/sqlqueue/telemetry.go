package sqlqueue

import (
	"errors"
	"time"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue/internal/sqltime"
)

// This file is what the queue tables tell telemetry: when a message was published (created_at)
// and which system it came from.

// timeScanner scans a time column as the dialect returns it (a time.Time, or text) into a
// time.Time; NULL leaves it zero.
type timeScanner time.Time

func (t *timeScanner) Scan(src any) error {
	if src == nil {
		*t = timeScanner{}
		return nil
	}
	v, err := sqltime.Parse(src)
	if err != nil {
		return err
	}
	*t = timeScanner(v)
	return nil
}

// SetTime stores v in UTC, as Scan does (TimeDest).
func (t *timeScanner) SetTime(v time.Time) { *t = timeScanner(v.UTC()) }

var _ TimeDest = (*sqltime.Scanner)(nil)

// EnqueuedAt is the row's created_at (core.Enqueued): a retried row keeps it. A table without
// the column reports false.
func (d *delivery) EnqueuedAt() (time.Time, bool) { return d.createdAt, !d.createdAt.IsZero() }

// MessagingSystem names the database as OpenTelemetry's messaging.system (core.MessagingSystem),
// from the family of SQL its dialect declares (FamilyOf): postgresql, mysql (MySQL and MariaDB),
// sqlite, the family's own name, or "unknown" for a dialect that declares none.
func (d *delivery) MessagingSystem() string { return systemName(FamilyOf(d.rt.d)) }

func systemName(f Family) string {
	switch f {
	case FamilyPostgres:
		return "postgresql"
	case FamilyMySQL, FamilyMariaDB:
		return "mysql"
	case "":
		return "unknown"
	}
	return string(f)
}

var (
	_ core.Enqueued        = (*delivery)(nil)
	_ core.MessagingSystem = (*delivery)(nil)
)

// PublishPropagator writes the trace context of each Publish's context into the message's
// headers with p (a table with a headers column only). Without it the publisher uses the
// propagator the context carries: an App's handlers carry their App's (core.WithPropagator).
func PublishPropagator(p core.Propagator) PublisherOption {
	return func(pub *Publisher) error {
		if p == nil {
			return errors.New("sqlqueue.PublishPropagator(nil): no propagator")
		}
		pub.prop = p
		return nil
	}
}
