package amqptest

import (
	"fmt"
	"time"

	"github.com/rabbitmq/amqp091-go"
)

// normalize returns a deep copy of t with the Go types a table has after a round trip through
// the wire, as amqp091-go encodes and decodes them: int becomes int32, times lose their
// sub-second part and read back in the local zone.
func normalize(t amqp091.Table) amqp091.Table {
	if t == nil {
		return nil
	}
	out := make(amqp091.Table, len(t))
	for k, v := range t {
		out[k] = normalizeValue(v)
	}
	return out
}

func normalizeValue(v any) any {
	switch v := v.(type) {
	case int:
		return int32(v)
	case time.Time:
		return time.Unix(v.Unix(), 0)
	case amqp091.Table:
		return normalize(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normalizeValue(e)
		}
		return out
	case []byte:
		return append([]byte(nil), v...)
	}
	return v
}

// typeName is the AMQP type name RabbitMQ prints in its error messages.
func typeName(v any) string {
	switch v.(type) {
	case bool:
		return "bool"
	case int8:
		return "byte"
	case uint8:
		return "unsignedbyte"
	case int16:
		return "short"
	case uint16:
		return "unsignedshort"
	case int, int32:
		return "signedint"
	case uint32:
		return "unsignedint"
	case int64:
		return "long"
	case float32:
		return "float"
	case float64:
		return "double"
	case amqp091.Decimal:
		return "decimal"
	case string:
		return "longstr"
	case []any:
		return "array"
	case time.Time:
		return "timestamp"
	case amqp091.Table:
		return "table"
	case []byte:
		return "binary"
	case nil:
		return "void"
	}
	return fmt.Sprintf("%T", v)
}

// typeClass groups the types RabbitMQ considers equivalent when it compares arguments.
func typeClass(v any) string {
	switch v.(type) {
	case int8, uint8, int16, uint16, int, int32, uint32, int64:
		return "int"
	case float32, float64:
		return "float"
	}
	return typeName(v)
}

// asInt returns an integer argument or header value.
func asInt(v any) (int64, bool) {
	switch v := v.(type) {
	case int8:
		return int64(v), true
	case uint8:
		return int64(v), true
	case int16:
		return int64(v), true
	case uint16:
		return int64(v), true
	case int:
		return int64(v), true
	case int32:
		return int64(v), true
	case uint32:
		return int64(v), true
	case int64:
		return v, true
	}
	return 0, false
}

func formatValue(v any) string {
	if i, ok := asInt(v); ok {
		return fmt.Sprint(i)
	}
	return fmt.Sprint(v)
}

// describe renders an argument the way RabbitMQ's rabbit_misc:val/1 does.
func describe(v any, present bool) string {
	if !present {
		return "none"
	}
	return fmt.Sprintf("the value '%s' of type '%s'", formatValue(v), typeName(v))
}

// equalValues compares two argument values as RabbitMQ does: same type class, same value.
func equalValues(a, b any) bool {
	if typeClass(a) != typeClass(b) {
		return false
	}
	if x, ok := asInt(a); ok {
		y, _ := asInt(b)
		return x == y
	}
	return fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b)
}

// argEquivalence checks the keys RabbitMQ compares when an entity is declared again. It
// returns the message of the PRECONDITION_FAILED error, or "" when the arguments agree.
func argEquivalence(current, received amqp091.Table, keys []string, what string) string {
	for _, k := range keys {
		cv, cok := current[k]
		rv, rok := received[k]
		switch {
		case !cok && !rok:
			continue
		case cok && rok:
			if equalValues(cv, rv) {
				continue
			}
			if typeClass(cv) == typeClass(rv) {
				return fmt.Sprintf("inequivalent arg '%s' for %s: received '%s' but current is '%s'", k, what, formatValue(rv), formatValue(cv))
			}
		}
		return fmt.Sprintf("inequivalent arg '%s' for %s: received %s but current is %s", k, what, describe(rv, rok), describe(cv, cok))
	}
	return ""
}

// classicEquivalenceKeys and quorumEquivalenceKeys are the queue arguments RabbitMQ 3.10
// compares on redeclaration, in the order it compares them (each queue type's
// queue_arguments): the first that differs is the one the 406 names, which settle relies on to
// read a queue's arguments without declaring. Any other argument is ignored.
var (
	classicEquivalenceKeys = []string{
		"x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key",
		"x-max-length", "x-max-length-bytes", "x-max-in-memory-length", "x-max-in-memory-bytes",
		"x-max-priority", "x-overflow", "x-queue-mode", "x-single-active-consumer", "x-queue-type",
		"x-queue-master-locator", "x-queue-version",
	}
	quorumEquivalenceKeys = []string{
		"x-expires", "x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy",
		"x-max-length", "x-max-length-bytes", "x-max-in-memory-length", "x-max-in-memory-bytes",
		"x-overflow", "x-single-active-consumer", "x-queue-type", "x-quorum-initial-group-size",
		"x-delivery-limit", "x-message-ttl", "x-queue-leader-locator",
	}
)

// MaxTTL is the largest per-message expiration and x-message-ttl, in milliseconds, that
// RabbitMQ 3.10 accepts (ten years, measured: 315360000000 is taken, 315360000001 refused with
// {value_too_large,N}); larger values are refused the same way here.
const MaxTTL = 315360000000

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
