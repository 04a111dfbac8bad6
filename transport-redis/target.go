package redisq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/clock"
)

var _ core.Target = (*Queue)(nil)

// Sender returns the publishing side of the queue's stream (core.Target): core.NewPublisher
// takes the Queue, and every Publish adds an entry.
//
// A message is one XADD: its body in BodyField, each header a field of its own, core.MessageID
// in IDField, core.CorrelationID in CorrelationField, core.OrderingKey in OrderingKeyField (it
// reaches the handler; subscriptions do not order by it yet). A message with core.Delay or
// core.NotBefore goes to the stream's delay set instead, due on the Client's clock (WithClock),
// and a subscription moves it to the stream once due. A core.DedupKey is held in the stream's
// dedup index (DedupSuffix) from the publish until the message is acknowledged, dropped or
// dead-lettered (a retry or a delay keeps it): a publish with a key still held stores nothing and
// answers a Duplicate receipt with the holder's id. A batch is one pipeline. The Receipt's ID is
// the core.MessageID given, or the new entry's id; a delayed message without one gets a random
// id, in IDField. A publish is reported done once Redis has applied it (durable as far as the
// server's persistence goes).
//
// Refused with a *core.UnsupportedError: core.Priority (a stream is one log, read in order), a
// header named "body", and options of other backends.
func (q *Queue) Sender(ctx context.Context) (core.Sender, error) {
	rdb, err := q.c.client()
	if err != nil {
		return nil, err
	}
	if err := publishScript.Load(ctx, rdb).Err(); err != nil {
		return nil, fmt.Errorf("redisq: load the publish script for stream %q at %s: %w", q.cfg.stream, q.c.addr(), err)
	}
	return &sender{q: q, rdb: rdb, backend: "redis stream " + strconv.Quote(q.cfg.stream),
		keys: []string{q.cfg.stream, q.cfg.delayed, q.cfg.dedup}}, nil
}

type sender struct {
	q       *Queue
	rdb     redis.UniversalClient
	backend string
	keys    []string // the stream, its delay set and its dedup index
}

var _ core.Sender = (*sender)(nil)

// Clock is the Client's clock: the due times of delayed messages are written on it.
func (s *sender) Clock() clock.Clock { return s.q.c.clock }

// Send publishes msgs in one pipeline and returns a Receipt per message: a plain message is an
// XADD, one with a dedup key or a later due time one publishScript call.
func (s *sender) Send(ctx context.Context, msgs []core.Outgoing) []core.Receipt {
	rs := make([]core.Receipt, len(msgs))
	cmds := make([]redis.Cmder, len(msgs))
	var scripted [][]any // the arguments of scripted messages by index, for a NOSCRIPT retry
	now := s.q.c.clock.Now()
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range msgs {
			m := &msgs[i]
			if rs[i].Err = s.refuse(m); rs[i].Err != nil {
				continue
			}
			later := !m.NotBefore.IsZero() && m.NotBefore.After(now)
			if !later && m.DedupKey == "" {
				cmds[i] = p.XAdd(ctx, &redis.XAddArgs{Stream: s.q.cfg.stream, Values: entryFields(m)})
				continue
			}
			due := ""
			if later {
				due = strconv.FormatInt(m.NotBefore.UnixMilli(), 10)
				if m.ID == "" {
					m.ID = randomID() // the delay set's member needs it now
				}
			}
			args := append([]any{m.DedupKey, m.ID, due}, entryFields(m)...)
			cmds[i] = publishScript.EvalSha(ctx, p, s.keys, args...)
			if scripted == nil {
				scripted = make([][]any, len(msgs))
			}
			scripted[i] = args
		}
		return nil
	})
	for i, c := range cmds {
		if c == nil {
			continue
		}
		if scripted != nil && scripted[i] != nil {
			rs[i] = s.scripted(ctx, c, scripted[i])
			continue
		}
		if err := c.Err(); err != nil {
			rs[i].Err = s.sendErr(err)
			continue
		}
		rs[i].ID = msgs[i].ID
		if rs[i].ID == "" {
			rs[i].ID = c.(*redis.StringCmd).Val()
		}
	}
	return rs
}

// scripted reads the receipt of a publishScript call, running it again when the server lost
// its script cache (a restart).
func (s *sender) scripted(ctx context.Context, c redis.Cmder, args []any) core.Receipt {
	res, err := c.(*redis.Cmd).Slice()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		res, err = publishScript.Run(ctx, s.rdb, s.keys, args...).Slice()
	}
	if err != nil {
		return core.Receipt{Err: s.sendErr(err)}
	}
	stored, _ := res[0].(int64)
	id, _ := res[1].(string)
	return core.Receipt{ID: id, Duplicate: stored == 0}
}

func (s *sender) sendErr(err error) error {
	return fmt.Errorf("redisq: publish to stream %q at %s: %w", s.q.cfg.stream, s.q.c.addr(), err)
}

// refuse returns the error of an option the stream cannot honour, nil when it can take m.
func (s *sender) refuse(m *core.Outgoing) error {
	if err := m.Options.Unread("redisq"); err != nil {
		return err
	}
	switch {
	case m.Priority != 0:
		return &core.UnsupportedError{Option: "core.Priority", Backend: s.backend,
			Reason:  "a stream is one log, read in the order entries were added",
			Instead: "publish urgent messages to a stream of their own with more workers"}
	}
	for k := range m.Headers {
		if k == BodyField {
			return &core.UnsupportedError{Option: "core.Header(" + strconv.Quote(k) + ")", Backend: s.backend,
				Reason: "the entry field \"body\" holds the payload", Instead: "name the header otherwise"}
		}
	}
	return nil
}

// entryFields lays out m as the fields of a stream entry.
func entryFields(m *core.Outgoing) []any {
	f := make([]any, 0, 2+2*len(m.Headers)+6)
	f = append(f, BodyField, m.Body)
	for k, v := range m.Headers {
		f = append(f, k, v)
	}
	if m.ID != "" {
		f = append(f, IDField, m.ID)
	}
	if m.CorrelationID != "" {
		f = append(f, CorrelationField, m.CorrelationID)
	}
	if m.OrderingKey != "" {
		f = append(f, OrderingKeyField, m.OrderingKey)
	}
	if m.DedupKey != "" {
		f = append(f, DedupField, m.DedupKey)
	}
	return f
}

// randomID is the id of a delayed message published without one: 16 random bytes in hex.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
