package natsjs

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/settlehq/settle/core"
)

// PublishOption configures one Publish.
type PublishOption func(*publishing) error

type publishing struct {
	headers map[string]string
	id      string
	codec   core.Codec
	prop    core.Propagator // WithPropagator; nil: the context's
}

// WithMsgID sets the message's Nats-Msg-Id: the stream drops a second message with the same id
// published within its duplicate window (two minutes by default), and the subscription reports
// it as the delivery's ID.
func WithMsgID(id string) PublishOption {
	return func(p *publishing) error {
		if id == "" {
			return errors.New("natsjs.WithMsgID(\"\"): the message id is empty")
		}
		p.id = id
		return nil
	}
}

// WithHeaders sets the message's headers. Keys beginning with "Nats-" are the server's and are
// refused (set the message id with WithMsgID); keys and values cannot contain line breaks.
func WithHeaders(h map[string]string) PublishOption {
	return func(p *publishing) error {
		if err := checkHeaders("natsjs.WithHeaders", h); err != nil {
			return err
		}
		p.headers = maps.Clone(h)
		return nil
	}
}

// WithPayloadCodec encodes the payload with c (default core.JSON).
func WithPayloadCodec(c core.Codec) PublishOption {
	return func(p *publishing) error {
		if c == nil {
			return errors.New("natsjs.WithPayloadCodec(nil): no codec")
		}
		p.codec = c
		return nil
	}
}

func checkHeaders(what string, h map[string]string) error {
	for k, v := range h {
		switch {
		case k == "":
			return fmt.Errorf("%s: an empty header name", what)
		case serverHeader(k):
			return fmt.Errorf("%s: header %q: the Nats- prefix is reserved for the server", what, k)
		}
		for _, r := range k {
			if r <= ' ' || r == ':' || r == 0x7f {
				return fmt.Errorf("%s: header name %q: no spaces, control characters or ':'", what, k)
			}
		}
		for _, r := range v {
			if r == '\r' || r == '\n' {
				return fmt.Errorf("%s: header %q: the value contains a line break", what, k)
			}
		}
	}
	return nil
}

// Publish encodes v and publishes it to subject, and returns once JetStream has stored it (the
// publish acknowledgement; Duplicate is set when the stream dropped it as a duplicate of an
// earlier message with the same WithMsgID). It fails when no stream captures the subject, and
// at once when the connection drops while the acknowledgement is awaited (the message may have
// been stored: publish it again with the same WithMsgID).
func Publish[T any](ctx context.Context, c *Conn, subject string, v T, opts ...PublishOption) (*jetstream.PubAck, error) {
	if c == nil {
		return nil, errors.New("natsjs.Publish: nil Conn")
	}
	if err := validPublishSubject("natsjs.Publish: subject", subject); err != nil {
		return nil, err
	}
	p := publishing{codec: core.JSON}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("natsjs.Publish: nil option")
		}
		if err := o(&p); err != nil {
			return nil, err
		}
	}
	body, err := p.codec.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("natsjs.Publish to %q: encode %T: %w", subject, v, err)
	}
	return c.publish(ctx, subject, body, core.InjectHeaders(ctx, p.prop, p.headers), p.id)
}

// PublishRaw publishes body as it is to subject with headers (which it checks as WithHeaders
// does) and message id (none when empty), and returns JetStream's acknowledgement.
func PublishRaw(ctx context.Context, c *Conn, subject string, body []byte, headers map[string]string, id string) (*jetstream.PubAck, error) {
	if c == nil {
		return nil, errors.New("natsjs.PublishRaw: nil Conn")
	}
	if err := validPublishSubject("natsjs.PublishRaw: subject", subject); err != nil {
		return nil, err
	}
	if err := checkHeaders("natsjs.PublishRaw", headers); err != nil {
		return nil, err
	}
	return c.publish(ctx, subject, body, core.InjectHeaders(ctx, nil, headers), id)
}

func (c *Conn) publish(ctx context.Context, subject string, body []byte, headers map[string]string, id string) (*jetstream.PubAck, error) {
	js, err := c.jetStream()
	if err != nil {
		return nil, err
	}
	msg := &nats.Msg{Subject: subject, Data: body}
	if len(headers) > 0 || id != "" {
		msg.Header = make(nats.Header, len(headers)+1)
		for k, v := range headers {
			msg.Header[k] = []string{v}
		}
		if id != "" {
			msg.Header[jetstream.MsgIDHeader] = []string{id}
		}
	}
	ack, err := c.publishMsg(ctx, js, msg)
	if err != nil {
		return nil, fmt.Errorf("natsjs: publish to %q: %w", subject, err)
	}
	return ack, nil
}

// publishMsg publishes msg and waits for JetStream's acknowledgement until ctx ends, the
// request times out, or the connection drops (untilDrop): the acknowledgement of a message
// sent before a drop will not come, whether or not the server stored it. The error then says
// so; published again with the same Nats-Msg-Id, a stored message is dropped as a duplicate.
func (c *Conn) publishMsg(ctx context.Context, js jetstream.JetStream, msg *nats.Msg) (*jetstream.PubAck, error) {
	ctx, done := c.untilDrop(ctx)
	defer done()
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil && errors.Is(context.Cause(ctx), errDropped) {
		return nil, fmt.Errorf("%w (the message may have been stored; published again with the same Nats-Msg-Id, it is dropped as a duplicate): %w", errDropped, err)
	}
	return ack, err
}
