package amqp

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/rabbitmq/amqp091-go"
)

// probeType is a queue type no RabbitMQ knows. A declaration with it can never create a queue
// (the server refuses an unknown type), and on an existing queue the server compares it with
// the queue's own type and says what that is.
const probeType = "settle-verify"

// errInconclusive: the server did not say what the queue's arguments are (it accepted the
// probe, or the queue is exclusive to another connection); the check is skipped.
var errInconclusive = errors.New("the server did not report the queue's arguments")

// queueArguments reads the arguments of the existing queue name without declaring anything:
// AMQP has no way to read them, so it redeclares the queue with x-queue-type set to an unknown
// type plus every argument learnt so far. RabbitMQ compares a redeclaration argument by
// argument and names the first that differs with the queue's own value ("inequivalent arg
// 'x-delivery-limit' …: received none but current is the value '5' of type 'long'"), so each
// round learns one argument, until the only difference left is the type itself. A queue that
// does not exist is never created: the unknown type is refused first. Each round costs a
// channel from open (the server closes it). The result holds x-queue-type ("classic" for a
// queue declared without one).
func queueArguments(open func() (Channel, error), name string, durable, autoDelete bool) (amqp091.Table, error) {
	learnt := amqp091.Table{}
	typ := ""      // the queue's type, once the server named it
	sentinel := "" // phase two: an argument sent with a value no queue can be created with
	for round := 0; round < 64; round++ {
		ch, err := open()
		if err != nil {
			return nil, err
		}
		args := amqp091.Table{"x-queue-type": probeType}
		for k, v := range learnt {
			args[k] = v
		}
		if typ != "" {
			args["x-queue-type"] = typ
			args[sentinel] = int64(-1)
		}
		_, err = ch.QueueDeclare(name, durable, autoDelete, false, false, args)
		_ = ch.Close()
		if err == nil {
			if typ != "" {
				learnt["x-queue-type"] = typ
				return learnt, nil // the server compares no argument after those it named
			}
			return nil, errInconclusive
		}
		var ae *amqp091.Error
		if !errors.As(err, &ae) {
			return nil, err
		}
		switch ae.Code {
		case amqp091.NotFound:
			return nil, err
		case amqp091.ResourceLocked, amqp091.AccessRefused:
			return nil, errInconclusive
		case amqp091.PreconditionFailed:
		default:
			return nil, err
		}
		key, received, current, ok := parseInequivalent(ae.Reason)
		if !ok {
			if strings.Contains(ae.Reason, "invalid arg") {
				// The queue is gone: the server tried to create it and refused the probe.
				return nil, &amqp091.Error{Code: amqp091.NotFound, Reason: fmt.Sprintf("NOT_FOUND - no queue '%s' (it vanished while settle verified it)", name)}
			}
			return nil, fmt.Errorf("%w: %s", errInconclusive, ae.Reason)
		}
		switch {
		case key == "durable":
			durable = !durable
			continue
		case key == "auto_delete":
			autoDelete = !autoDelete
			continue
		case key == "x-queue-type" && typ == "":
			// Phase two: RabbitMQ compares some arguments after the type (a quorum queue's
			// x-delivery-limit and x-message-ttl on 3.10), so go on with the queue's own type
			// and a sentinel no queue can be created with (a negative TTL), in case the queue
			// vanished meanwhile; the sentinel's own difference ends the reading.
			typ = "classic"
			if current != nil {
				typ = fmt.Sprint(current)
			}
			sentinel = "x-message-ttl"
			if _, ok := learnt[sentinel]; ok {
				sentinel = "x-expires"
				if _, ok := learnt[sentinel]; ok {
					learnt["x-queue-type"] = typ
					return learnt, nil
				}
			}
			continue
		case key == sentinel:
			if current != nil {
				learnt[key] = current
			}
			learnt["x-queue-type"] = typ
			return learnt, nil
		}
		if received != nil || current == nil {
			return nil, fmt.Errorf("%w: %s", errInconclusive, ae.Reason)
		}
		learnt[key] = current
	}
	return nil, fmt.Errorf("%w: more than 64 arguments", errInconclusive)
}

// parseInequivalent reads RabbitMQ's "inequivalent arg 'K' for queue 'Q' in vhost 'V': received
// R but current is C" (rabbit_misc:assert_args_equivalence). R and C are "none", "'v'" (same
// type class as the other side) or "the value 'v' of type 't'"; nil stands for none.
func parseInequivalent(reason string) (key string, received, current any, ok bool) {
	const head = "inequivalent arg '"
	i := strings.Index(reason, head)
	if i < 0 {
		return "", nil, nil, false
	}
	rest := reason[i+len(head):]
	j := strings.IndexByte(rest, '\'')
	if j < 0 {
		return "", nil, nil, false
	}
	key = rest[:j]
	k := strings.Index(rest, ": received ")
	if k < 0 {
		return "", nil, nil, false
	}
	rest = rest[k+len(": received "):]
	m := strings.LastIndex(rest, " but current is ")
	if m < 0 {
		return "", nil, nil, false
	}
	r, c := rest[:m], rest[m+len(" but current is "):]
	var rok, cok bool
	if received, rok = parseArgValue(r); !rok {
		return "", nil, nil, false
	}
	if current, cok = parseArgValue(c); !cok {
		return "", nil, nil, false
	}
	return key, received, current, true
}

// parseArgValue reads one side of an inequivalence: none, 'v', or the value 'v' of type 't'.
func parseArgValue(s string) (any, bool) {
	s = strings.TrimSpace(s)
	if s == "none" {
		return nil, true
	}
	if strings.HasPrefix(s, "the value '") {
		body := s[len("the value '"):]
		t := strings.LastIndex(body, "' of type '")
		if t < 0 || !strings.HasSuffix(body, "'") {
			return nil, false
		}
		v, typ := body[:t], body[t+len("' of type '"):len(body)-1]
		switch typ {
		case "longstr", "shortstr":
			return v, true
		case "long", "signedint", "short", "byte", "unsignedbyte", "unsignedshort", "unsignedint":
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		case "bool":
			return v == "true", v == "true" || v == "false"
		case "double", "float":
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
		return nil, false
	}
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		v := s[1 : len(s)-1]
		if v == "true" || v == "false" {
			return v == "true", true
		}
		return v, true // a same-class difference: only the queue type and flags reach here
	}
	return nil, false
}

// argString reads a string argument as the server reported it.
func argString(t amqp091.Table, k string) (string, bool) {
	v, ok := t[k]
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	return s, ok
}
