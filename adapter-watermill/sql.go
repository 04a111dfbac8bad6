package settlewatermill

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
)

// SQLDB is what the adapter needs of a settle SQL dialect's DB: *sqlite.DB, *postgres.DB and
// *mysql.DB all have these methods.
type SQLDB interface {
	// Queue is the DB as the engine's connection surface.
	Queue() sqlqueue.DB
	// Dialect spells the DB's statements.
	Dialect() sqlqueue.Dialect
	// CreateTable creates a queue table if it does not exist.
	CreateTable(ctx context.Context, t sqlqueue.Table) error
}

// SQLForm is a dialect's endpoint constructor for one claim form: sqlite.Lease, postgres.RowLock,
// mysql.Advisory, …
type SQLForm[D SQLDB] func(db D, t sqlqueue.Table, group string) (core.Endpoint, error)

// SQLPublisherFunc is a dialect's publisher constructor: sqlite.NewPublisher,
// postgres.NewPublisher or mysql.NewPublisher.
type SQLPublisherFunc[D SQLDB] func(db D, t sqlqueue.Table, group string, opts ...sqlqueue.PublisherOption) (*sqlqueue.Publisher, error)

// SQLTopics are Topics on one SQL queue table with a group column: each queue is a group of
// the table. Without FanOut a topic is one queue (group = the topic); with it, each consumer
// group of a topic has a queue (group = QueueName(topic, group)) and a publish inserts one row
// for every consumer group registered in the table's consumer-groups table.
type SQLTopics struct {
	db       sqlqueue.DB
	dialect  sqlqueue.Dialect
	table    sqlqueue.Table
	endpoint func(t sqlqueue.Table, group string) (core.Endpoint, error)
	newPub   func(t sqlqueue.Table, group string) (*sqlqueue.Publisher, error)
	create   func(ctx context.Context, t sqlqueue.Table) error
	cfg      sqlConfig

	created     sync.Mutex // held while creating; createdOK says it is done
	createdOK   bool
	pubs        sync.Map // queue → *sqlqueue.Publisher
	groupsSQL   string   // SELECT of a topic's consumer groups
	registerSQL string   // INSERT of a consumer group
}

var _ Topics = (*SQLTopics)(nil)

type sqlConfig struct {
	create      bool
	fanOut      bool
	groupsTable string
	queueName   QueueNameFunc
}

// SQLOption configures SQLTopics.
type SQLOption func(*sqlConfig) error

// CreateTables lets the Topics create the queue table (with the dialect's CreateTable) and, for
// FanOut, the consumer-groups table, on first use, if they do not exist. Without it both must
// exist; a missing one fails Subscribe or Publish naming it.
func CreateTables() SQLOption {
	return func(c *sqlConfig) error { c.create = true; return nil }
}

// FanOut gives each consumer group of a topic a queue of its own: a Subscriber must then have a
// ConsumerGroup, and Publish inserts one row per consumer group registered for the topic (in one
// transaction), in the queue named by QueueName. A group is registered, in the table named by
// ConsumerGroupsTable, when a subscriber of it first subscribes (or calls SubscribeInitialize);
// it receives what is published from then on. A publish to a topic with no group fails with
// ErrNoQueue.
func FanOut() SQLOption {
	return func(c *sqlConfig) error { c.fanOut = true; return nil }
}

// ConsumerGroupsTable names the table FanOut registers consumer groups in (default: the queue
// table's name + "_consumer_groups", in the same schema). Its columns are topic and
// consumer_group, both text, with both as the primary key; CreateTables creates it.
func ConsumerGroupsTable(name string) SQLOption {
	return func(c *sqlConfig) error {
		if !sqlqueue.ValidIdent(name) {
			return fmt.Errorf("settlewatermill.ConsumerGroupsTable(%q): invalid table name (letters, digits, _ and $, starting with a letter or _, at most 63 bytes)", name)
		}
		c.groupsTable = name
		return nil
	}
}

// QueueName names the queue of a consumer group of a topic under FanOut (default
// DefaultQueueName: "<topic>.<group>").
func QueueName(f QueueNameFunc) SQLOption {
	return func(c *sqlConfig) error {
		if f == nil {
			return errors.New("settlewatermill.QueueName(nil): no function")
		}
		c.queueName = f
		return nil
	}
}

// SQL returns Topics on the queue table t of db, whose subscriptions use the claim form form
// (e.g. sqlite.Lease) and whose publishes go through publisher (e.g. sqlite.NewPublisher):
//
//	topics, err := settlewatermill.SQL(db, table, sqlite.Lease, sqlite.NewPublisher, settlewatermill.CreateTables())
//
// t needs a group column (a queue is a group) and a headers column (the UUID and the metadata
// live there); a retry_after column makes RedeliveryDelay a delay kept in the database.
func SQL[D SQLDB](db D, t sqlqueue.Table, form SQLForm[D], publisher SQLPublisherFunc[D], opts ...SQLOption) (*SQLTopics, error) {
	if form == nil || publisher == nil {
		return nil, errors.New("settlewatermill.SQL: nil form or publisher constructor")
	}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("settlewatermill.SQL: %w", err)
	}
	if t.Columns.Group == "" {
		return nil, fmt.Errorf("settlewatermill.SQL: table %s has no group column: the adapter keeps every topic's queue as a group of one table", t.Ref())
	}
	if t.Columns.Headers == "" {
		return nil, fmt.Errorf("settlewatermill.SQL: table %s has no headers column: a message's UUID and metadata are kept there", t.Ref())
	}
	cfg := sqlConfig{groupsTable: t.Name + "_consumer_groups", queueName: DefaultQueueName}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("settlewatermill.SQL: nil option")
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if !sqlqueue.ValidIdent(cfg.groupsTable) {
		return nil, fmt.Errorf("settlewatermill.SQL: the consumer-groups table name %q is not a valid identifier; name one with ConsumerGroupsTable", cfg.groupsTable)
	}
	d := db.Dialect()
	s := &SQLTopics{
		db: db.Queue(), dialect: d, table: t, cfg: cfg,
		endpoint: func(t sqlqueue.Table, group string) (core.Endpoint, error) { return form(db, t, group) },
		newPub:   func(t sqlqueue.Table, group string) (*sqlqueue.Publisher, error) { return publisher(db, t, group) },
		create:   db.CreateTable,
	}
	gt := d.Quote(cfg.groupsTable)
	if t.Schema != "" {
		gt = d.Quote(t.Schema) + "." + gt
	}
	s.groupsSQL = "SELECT consumer_group FROM " + gt + " WHERE topic = " + d.Placeholder(1) + " ORDER BY consumer_group"
	s.registerSQL = "INSERT INTO " + gt + " (topic, consumer_group) VALUES (" + d.Placeholder(1) + ", " + d.Placeholder(2) + ")"
	return s, nil
}

// groupsDDL creates the consumer-groups table; the same text runs on SQLite, PostgreSQL and
// MySQL/MariaDB (191 characters keep a utf8mb4 key within InnoDB's limit).
func (s *SQLTopics) groupsDDL() string {
	gt := s.dialect.Quote(s.cfg.groupsTable)
	if s.table.Schema != "" {
		gt = s.dialect.Quote(s.table.Schema) + "." + gt
	}
	return "CREATE TABLE IF NOT EXISTS " + gt + " (topic VARCHAR(191) NOT NULL, consumer_group VARCHAR(191) NOT NULL, PRIMARY KEY (topic, consumer_group))"
}

// ensure creates the tables once, when the Topics may.
func (s *SQLTopics) ensure(ctx context.Context) error {
	if !s.cfg.create {
		return nil
	}
	s.created.Lock()
	defer s.created.Unlock()
	if s.createdOK {
		return nil
	}
	if err := again(func() error { return s.create(ctx, s.table) }); err != nil {
		return err
	}
	if s.cfg.fanOut {
		err := again(func() error { _, err := s.db.Exec(ctx, s.groupsDDL()); return err })
		if err != nil {
			return fmt.Errorf("create consumer-groups table %s: %w", s.cfg.groupsTable, err)
		}
	}
	s.createdOK = true
	return nil
}

// again runs a CREATE … IF NOT EXISTS again when it fails, a few times: sessions creating one
// table at once may each miss what the others are creating, and PostgreSQL then fails all but
// one with a duplicate key in its catalogue (the table's type, then its index); run again, the
// statements find what the winner created.
func again(create func() error) error {
	var err error
	for range 4 {
		if err = create(); err == nil {
			return nil
		}
	}
	return err
}

// Endpoint returns the endpoint of topic's queue (under FanOut: of group's queue, registering
// the group first).
func (s *SQLTopics) Endpoint(ctx context.Context, topic, group string) (core.Endpoint, error) {
	if err := checkGroup("SQL", topic, group, s.cfg.fanOut); err != nil {
		return nil, err
	}
	if err := s.ensure(ctx); err != nil {
		return nil, fmt.Errorf("settlewatermill: topic %q: %w", topic, err)
	}
	queue := topic
	if s.cfg.fanOut {
		queue = s.cfg.queueName(topic, group)
		if err := s.register(ctx, topic, group); err != nil {
			return nil, fmt.Errorf("settlewatermill: topic %q: register consumer group %q in table %s: %w", topic, group, s.cfg.groupsTable, err)
		}
	}
	ep, err := s.endpoint(s.table, queue)
	if err != nil {
		return nil, fmt.Errorf("settlewatermill: topic %q: %w", topic, err)
	}
	return ep, nil
}

// register records group as a consumer group of topic, unless it already is (a concurrent
// registration of the same group may win the insert: the group is then there all the same).
func (s *SQLTopics) register(ctx context.Context, topic, group string) error {
	groups, err := s.groups(ctx, topic)
	if err != nil {
		return err
	}
	for _, g := range groups {
		if g == group {
			return nil
		}
	}
	if _, err := s.db.Exec(ctx, s.registerSQL, topic, group); err != nil {
		if groups, err2 := s.groups(ctx, topic); err2 == nil {
			for _, g := range groups {
				if g == group {
					return nil
				}
			}
		}
		return err
	}
	return nil
}

func (s *SQLTopics) groups(ctx context.Context, topic string) ([]string, error) {
	rows, err := s.db.Query(ctx, s.groupsSQL, topic)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, rows.Close()
}

func (s *SQLTopics) publisher(queue string) (*sqlqueue.Publisher, error) {
	if p, ok := s.pubs.Load(queue); ok {
		return p.(*sqlqueue.Publisher), nil
	}
	p, err := s.newPub(s.table, queue)
	if err != nil {
		return nil, err
	}
	actual, _ := s.pubs.LoadOrStore(queue, p)
	return actual.(*sqlqueue.Publisher), nil
}

// Publish inserts msgs into topic's queue (under FanOut: into the queue of each of its consumer
// groups), in one transaction when there is more than one row.
func (s *SQLTopics) Publish(ctx context.Context, topic string, msgs []*message.Message) error {
	if strings.TrimSpace(topic) == "" {
		return errors.New("the topic is empty")
	}
	if err := s.ensure(ctx); err != nil {
		return err
	}
	queues := []string{topic}
	if s.cfg.fanOut {
		groups, err := s.groups(ctx, topic)
		if err != nil {
			return fmt.Errorf("read the consumer groups of topic %q from table %s: %w", topic, s.cfg.groupsTable, err)
		}
		if len(groups) == 0 {
			return ErrNoQueue
		}
		queues = queues[:0]
		for _, g := range groups {
			queues = append(queues, s.cfg.queueName(topic, g))
		}
	}
	pubs := make([]*sqlqueue.Publisher, len(queues))
	for i, q := range queues {
		p, err := s.publisher(q)
		if err != nil {
			return err
		}
		pubs[i] = p
	}
	if len(pubs) == 1 && len(msgs) == 1 {
		_, err := pubs[0].PublishRaw(ctx, msgs[0].Payload, sqlqueue.WithHeaders(headersOf(msgs[0])))
		return err
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		h := headersOf(m)
		for _, p := range pubs {
			if _, err := p.PublishRaw(ctx, m.Payload, sqlqueue.WithHeaders(h), sqlqueue.InTx(tx)); err != nil {
				_ = tx.Rollback(ctx)
				return err
			}
		}
	}
	return tx.Commit(ctx)
}
