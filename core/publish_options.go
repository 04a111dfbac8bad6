package core

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// PublishOptions are one message's publish options after validation. Core reads the ones it
// defines into the message's Outgoing; a backend reads its own with Ext, as it reads its
// subscription options from Options.
type PublishOptions struct {
	id, correlationID, orderingKey, dedupKey string
	headers                                  map[string]string
	delay                                    time.Duration
	notBefore                                time.Time
	priority                                 int
	set                                      publishSet

	ext extValues
}

// publishSet records which options were given, to refuse ones that contradict each other.
type publishSet uint8

const (
	setDelay publishSet = 1 << iota
	setNotBefore
)

// PublishOption sets something about one published message: the options of core
// (MessageID, Headers, Header, CorrelationID, OrderingKey, DedupKey, Delay, NotBefore, Priority)
// are understood by every backend or refused by it with an *UnsupportedError; a backend's own
// (postgres.InTx) are made with PublishOptionFunc.
type PublishOption interface {
	applyPublish(*PublishOptions) error
}

// PublishOptionFunc makes a PublishOption of a function; backends use it for their own publish
// options, storing their values with PublishOptions.SetExt. An error it returns refuses the
// message and should name the option.
type PublishOptionFunc func(*PublishOptions) error

func (f PublishOptionFunc) applyPublish(o *PublishOptions) error { return f(o) }

// Apply applies opts to o in order. A backend's option made with PublishOptionFunc uses it to
// apply core's options as part of itself.
func (o *PublishOptions) Apply(opts ...PublishOption) error {
	for i, opt := range opts {
		if opt == nil {
			return fmt.Errorf("publish option %d is nil", i)
		}
		if err := opt.applyPublish(o); err != nil {
			return err
		}
	}
	if o.set&setDelay != 0 && o.set&setNotBefore != 0 {
		return errors.New("core.Delay and core.NotBefore both given: a message has one time to be delivered at; give one of them")
	}
	return nil
}

// Ext returns the value a backend's publish option stored under key, and whether one was stored.
// A Sender reads its own options with it before sending a message, then refuses the message if
// Unread reports any left.
func (o *PublishOptions) Ext(key any) (any, bool) { return o.ext.get(key) }

// SetExt stores a backend publish option's value under key on behalf of the option named name
// (as a user writes it: "postgres.InTx(tx)"). Backends call it from their own options (see
// PublishOptionFunc); several options may share one key.
func (o *PublishOptions) SetExt(key any, name string, value any) { o.ext.set(key, name, value) }

// Unread returns an *UnsupportedError naming the backend options that no Ext call has read, nil
// when there are none. backend names the sender as its errors do (`amqp exchange "payouts"`). A
// Sender calls it for each message after reading the options it understands, and refuses the
// message with the error: the option belongs to another backend.
func (o *PublishOptions) Unread(backend string) error {
	if o == nil {
		return nil
	}
	var names []string
	for _, e := range o.ext {
		if !e.read {
			names = append(names, e.names...)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	return &UnsupportedError{Option: strings.Join(names, ", "), Backend: backend,
		Reason:  "the option belongs to another backend",
		Instead: "publish through that backend's target, or leave the option out"}
}

// MessageID publishes the message with id as its message id; the backend keeps it on every
// delivery (Delivery.ID), retry, copy and dead letter, so a consumer's inbox can drop a
// duplicate. Without it the backend assigns one. An id is 1 to 255 bytes of UTF-8 without
// control characters.
func MessageID(id string) PublishOption {
	return PublishOptionFunc(func(o *PublishOptions) error {
		if err := validToken("core.MessageID", "message id", id); err != nil {
			return err
		}
		o.id = id
		return nil
	})
}

// CorrelationID publishes the message with a correlation id (a request's id on its reply); the
// delivery carries it (see Correlated). Same rules as MessageID.
func CorrelationID(id string) PublishOption {
	return PublishOptionFunc(func(o *PublishOptions) error {
		if err := validToken("core.CorrelationID", "correlation id", id); err != nil {
			return err
		}
		o.correlationID = id
		return nil
	})
}

// OrderingKey publishes the message with an ordering key (a customer, an account); the delivery
// carries it (see Keyed). A subscription that asks for order handles the messages of one key one
// at a time, in publish order. Same rules as MessageID.
func OrderingKey(key string) PublishOption {
	return PublishOptionFunc(func(o *PublishOptions) error {
		if err := validToken("core.OrderingKey", "ordering key", key); err != nil {
			return err
		}
		o.orderingKey = key
		return nil
	})
}

// DedupKey publishes the message at most once while a message published with the same key is
// still pending on the target (not yet acknowledged, dropped or dead-lettered): a second
// publish stores nothing and its Receipt says Duplicate. Where the backend's window is bounded
// (JetStream's duplicate window) its documentation says so. Same rules as MessageID.
func DedupKey(key string) PublishOption {
	return PublishOptionFunc(func(o *PublishOptions) error {
		if err := validToken("core.DedupKey", "dedup key", key); err != nil {
			return err
		}
		o.dedupKey = key
		return nil
	})
}

// Delay holds the message back for d from the moment it is published, on the backend's clock
// (the Sender's Clock); 0 delivers at once. It cannot be combined with NotBefore.
func Delay(d time.Duration) PublishOption {
	return PublishOptionFunc(func(o *PublishOptions) error {
		if d < 0 {
			return fmt.Errorf("core.Delay(%v): the delay is negative", d)
		}
		o.delay, o.set = d, o.set|setDelay
		return nil
	})
}

// NotBefore holds the message back until t on the backend's clock; a time already past
// delivers at once. It cannot be combined with Delay.
func NotBefore(t time.Time) PublishOption {
	return PublishOptionFunc(func(o *PublishOptions) error {
		if t.IsZero() {
			return errors.New("core.NotBefore(time.Time{}): the time is zero; leave the option out to deliver at once")
		}
		o.notBefore, o.set = t, o.set|setNotBefore
		return nil
	})
}

// MaxPriority is the highest Priority.
const MaxPriority = 255

// Priority publishes the message with priority n, 1..MaxPriority: a backlog delivers higher
// priorities first, and messages of one priority in publish order. 0 is the default priority
// (no option). A backend whose queue has no priorities refuses it with an *UnsupportedError.
func Priority(n int) PublishOption {
	return PublishOptionFunc(func(o *PublishOptions) error {
		if n < 0 || n > MaxPriority {
			return fmt.Errorf("core.Priority(%d): a priority is 1..%d (0 for the default)", n, MaxPriority)
		}
		o.priority = n
		return nil
	})
}

// Headers adds h to the message's headers (a later option overrides an earlier one's key). Keys
// are non-empty and free of control characters, values free of CR, LF and NUL (every backend
// can carry them), and the prefix "settle-" is settle's own (dead-letter reasons, counts).
// The map is copied.
func Headers(h map[string]string) PublishOption {
	return PublishOptionFunc(func(o *PublishOptions) error {
		for _, k := range slices.Sorted(maps.Keys(h)) {
			if err := validHeader("core.Headers", k, h[k]); err != nil {
				return err
			}
		}
		if len(h) == 0 {
			return nil
		}
		if o.headers == nil {
			o.headers = make(map[string]string, len(h))
		}
		maps.Copy(o.headers, h)
		return nil
	})
}

// Header sets one header of the message; the rules of Headers apply.
func Header(key, value string) PublishOption {
	return PublishOptionFunc(func(o *PublishOptions) error {
		if err := validHeader("core.Header", key, value); err != nil {
			return err
		}
		if o.headers == nil {
			o.headers = make(map[string]string, 1)
		}
		o.headers[key] = value
		return nil
	})
}

// reservedPrefix starts the headers settle itself writes (HeaderRetryCount, HeaderOrigin, …).
const reservedPrefix = "settle-"

func validHeader(option, k, v string) error {
	call := option + "(" + quote(k) + ", " + quote(v) + ")"
	if option == "core.Headers" {
		call = option + ": header " + quote(k)
	}
	switch {
	case k == "":
		return errors.New(option + ": a header key is empty")
	case len(k) >= len(reservedPrefix) && strings.EqualFold(k[:len(reservedPrefix)], reservedPrefix):
		return errors.New(call + ": the prefix " + reservedPrefix + " is reserved for settle's own headers")
	case strings.ContainsFunc(k, isControl):
		return errors.New(call + ": the key has a control character")
	case strings.ContainsAny(v, "\r\n\x00"):
		return errors.New(call + ": the value has a CR, LF or NUL, which not every backend can carry")
	case !utf8.ValidString(k) || !utf8.ValidString(v):
		return errors.New(call + ": not valid UTF-8")
	}
	return nil
}

// maxToken bounds ids and keys: what every backend can carry (an AMQP short string).
const maxToken = 255

func validToken(option, what, s string) error {
	call := option + "(" + quote(s) + ")"
	switch {
	case strings.TrimSpace(s) == "":
		return errors.New(call + ": the " + what + " is empty")
	case len(s) > maxToken:
		return fmt.Errorf("%s: the %s is %d bytes; at most %d", call, what, len(s), maxToken)
	case !utf8.ValidString(s):
		return errors.New(call + ": the " + what + " is not valid UTF-8")
	case strings.ContainsFunc(s, isControl):
		return errors.New(call + ": the " + what + " has a control character")
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// quote quotes s for an error, shortened to 40 bytes.
func quote(s string) string { return strconv.Quote(truncate(s, 40)) }
