package asyncapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

// JSON renders the document as indented JSON, ending with a newline.
func (d *Document) JSON() ([]byte, error) {
	raw, err := json.MarshalIndent(d.doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("asyncapi: rendering JSON: %w", err)
	}
	return append(raw, '\n'), nil
}

// YAML renders the document as YAML, in the same order as JSON.
func (d *Document) YAML() ([]byte, error) {
	raw, err := json.Marshal(d.doc)
	if err != nil {
		return nil, fmt.Errorf("asyncapi: rendering YAML: %w", err)
	}
	// JSON is YAML: read it as a node tree, which keeps the order, and write it in block style.
	var n yaml.Node
	if err := yaml.Unmarshal(raw, &n); err != nil {
		return nil, fmt.Errorf("asyncapi: rendering YAML: %w", err)
	}
	block(&n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, fmt.Errorf("asyncapi: rendering YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("asyncapi: rendering YAML: %w", err)
	}
	return buf.Bytes(), nil
}

// block clears the flow and quoting styles JSON gave the nodes; the encoder quotes a string
// only where YAML would read it as something else.
func block(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		block(c)
	}
}

// Formats of Write.
const (
	FormatJSON = "json"
	FormatYAML = "yaml"
)

// FormatOf returns the format a file name's extension asks for: FormatJSON for .json,
// FormatYAML for .yaml, .yml and anything else.
func FormatOf(name string) string {
	if strings.HasSuffix(strings.ToLower(name), ".json") {
		return FormatJSON
	}
	return FormatYAML
}

// Write writes the document to w in format (FormatJSON or FormatYAML).
func (d *Document) Write(w io.Writer, format string) error {
	var raw []byte
	var err error
	switch format {
	case FormatJSON:
		raw, err = d.JSON()
	case FormatYAML:
		raw, err = d.YAML()
	default:
		return fmt.Errorf("asyncapi: format %q: want %q or %q", format, FormatJSON, FormatYAML)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(raw)
	return err
}
