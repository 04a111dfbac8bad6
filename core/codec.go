package core

import (
	"encoding/json"
	"fmt"
)

// Codec turns payloads into bytes and back. JSON is the default; Raw passes bytes through.
type Codec interface {
	// Marshal encodes v.
	Marshal(v any) ([]byte, error)
	// Unmarshal decodes data into the value v points to.
	Unmarshal(data []byte, v any) error
	// ContentType names the encoding (an AMQP content type, a header in a table).
	ContentType() string
}

// JSON is the default codec: encoding/json.
var JSON Codec = jsonCodec{}

// Raw passes bytes through: it marshals []byte, string, *[]byte and *string as they are, and
// unmarshals into *[]byte (sharing the delivery's bytes, which the handler must not modify) or
// *string.
var Raw Codec = rawCodec{}

type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
func (jsonCodec) ContentType() string                { return "application/json" }

type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	switch x := v.(type) {
	case []byte:
		return x, nil
	case string:
		return []byte(x), nil
	case *[]byte:
		return *x, nil
	case *string:
		return []byte(*x), nil
	}
	return nil, fmt.Errorf("raw codec: cannot marshal %T (want []byte or string)", v)
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	switch x := v.(type) {
	case *[]byte:
		*x = data // the delivery's own bytes: no copy on the hot path
		return nil
	case *string:
		*x = string(data)
		return nil
	}
	return fmt.Errorf("raw codec: cannot unmarshal into %T (want *[]byte or *string)", v)
}

func (rawCodec) ContentType() string { return "application/octet-stream" }

// DecodeError is the error a subscription's handler chain returns when a payload does not
// decode; it takes the decode policy.
type DecodeError struct {
	// Size is the size of the raw payload in bytes.
	Size int
	// Err is the codec's error.
	Err error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("decode payload of %d bytes: %v", e.Size, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// PanicError is the error a subscription's handler chain reports when the handler panicked; it
// takes the panic policy.
type PanicError struct {
	// Value is what the handler panicked with.
	Value any
	// Stack is the goroutine's stack at the panic.
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }
