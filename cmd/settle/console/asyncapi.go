package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// apiDoc is the AsyncAPI document the console serves: as given, in the other format, and as a
// page of tables.
type apiDoc struct {
	json, yaml []byte
	view       apiView
}

type apiView struct {
	Title, Version, Description, AsyncAPI string
	Channels                              []apiChannel
	Operations                            []apiOperation
	Messages                              []apiMessage
	Schemas                               []apiSchema
}

type apiChannel struct {
	ID, Address, Backend string
	Roles, About         []string
	Binding              []kv
	Messages             []string
}

type apiOperation struct {
	ID, Action, Channel, Summary string
	Messages                     []string
	Settle                       []kv
}

type apiMessage struct {
	ID, Title, Summary, ContentType, Headers, Payload string
}

type apiSchema struct {
	Name, Description, Raw string
	Properties             []apiProperty
}

type apiProperty struct {
	Name, Type, Description string
	Required                bool
}

// kv is a name and its value as text.
type kv struct{ K, V string }

// parseAsyncAPI reads an AsyncAPI 3 document, JSON or YAML.
func parseAsyncAPI(raw []byte) (*apiDoc, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("console: the AsyncAPI document is neither JSON nor YAML: %w", err)
	}
	if v, _ := doc["asyncapi"].(string); !strings.HasPrefix(v, "3.") {
		return nil, fmt.Errorf("console: the AsyncAPI document's version is %q; the console shows AsyncAPI 3 documents (settle asyncapi makes them)", v)
	}
	d := &apiDoc{view: viewOf(doc)}
	var err error
	if d.json, err = json.MarshalIndent(doc, "", "  "); err != nil {
		return nil, fmt.Errorf("console: the AsyncAPI document as JSON: %w", err)
	}
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		if d.yaml, err = yaml.Marshal(doc); err != nil {
			return nil, fmt.Errorf("console: the AsyncAPI document as YAML: %w", err)
		}
	} else {
		d.yaml = raw
	}
	return d, nil
}

func viewOf(doc map[string]any) apiView {
	info := obj(doc["info"])
	v := apiView{Title: str(info["title"]), Version: str(info["version"]), Description: str(info["description"]),
		AsyncAPI: str(doc["asyncapi"])}
	channels := obj(doc["channels"])
	for _, id := range sortedKeys(channels) {
		c := obj(channels[id])
		ch := apiChannel{ID: id, Address: str(c["address"]), Backend: str(c["x-settle-backend"]),
			Roles: strs(c["x-settle-roles"]), About: strs(c["x-settle-about"]), Messages: sortedKeys(obj(c["messages"]))}
		for _, b := range sortedKeys(obj(c["bindings"])) {
			ch.Binding = append(ch.Binding, flatten(b, obj(c["bindings"])[b])...)
		}
		for _, x := range []string{"x-settle-nats", "x-settle-sql"} {
			if c[x] != nil {
				ch.Binding = append(ch.Binding, flatten(strings.TrimPrefix(x, "x-settle-"), c[x])...)
			}
		}
		v.Channels = append(v.Channels, ch)
	}
	ops := obj(doc["operations"])
	for _, id := range sortedKeys(ops) {
		o := obj(ops[id])
		op := apiOperation{ID: id, Action: str(o["action"]), Channel: refName(obj(o["channel"])), Summary: str(o["summary"])}
		for _, m := range list(o["messages"]) {
			op.Messages = append(op.Messages, refName(obj(m)))
		}
		for _, k := range sortedKeys(o) {
			if strings.HasPrefix(k, "x-settle-") {
				op.Settle = append(op.Settle, flatten(strings.TrimPrefix(k, "x-settle-"), o[k])...)
			}
		}
		v.Operations = append(v.Operations, op)
	}
	comps := obj(doc["components"])
	msgs := obj(comps["messages"])
	for _, id := range sortedKeys(msgs) {
		m := obj(msgs[id])
		v.Messages = append(v.Messages, apiMessage{ID: id, Title: str(m["title"]), Summary: str(m["summary"]),
			ContentType: str(m["contentType"]), Headers: schemaText(m["headers"]), Payload: schemaText(m["payload"])})
	}
	schemas := obj(comps["schemas"])
	for _, name := range sortedKeys(schemas) {
		v.Schemas = append(v.Schemas, schemaOf(name, obj(schemas[name])))
	}
	return v
}

// schemaOf lists an object schema's properties; another schema is shown as JSON.
func schemaOf(name string, s map[string]any) apiSchema {
	out := apiSchema{Name: name, Description: str(s["description"])}
	props := obj(s["properties"])
	if len(props) == 0 {
		out.Raw = compact(s)
		return out
	}
	required := strs(s["required"])
	for _, p := range sortedKeys(props) {
		ps := obj(props[p])
		out.Properties = append(out.Properties, apiProperty{Name: p, Type: schemaText(ps),
			Description: str(ps["description"]), Required: slices.Contains(required, p)})
	}
	return out
}

// schemaText says in a few words what a (sub)schema is: a reference's name, a type with its
// format, or the schema as JSON.
func schemaText(v any) string {
	s := obj(v)
	if r := refName(s); r != "" {
		return r
	}
	t := str(s["type"])
	switch {
	case t == "array":
		return "array of " + schemaText(s["items"])
	case t != "" && s["format"] != nil:
		return t + " (" + str(s["format"]) + ")"
	case t != "":
		return t
	}
	return compact(v)
}

// flatten turns a nested value into name/value rows ("amqp.queue.durable" true).
func flatten(prefix string, v any) []kv {
	m, ok := v.(map[string]any)
	if !ok {
		return []kv{{prefix, text(v)}}
	}
	var out []kv
	for _, k := range sortedKeys(m) {
		out = append(out, flatten(prefix+"."+k, m[k])...)
	}
	return out
}

func refName(m map[string]any) string {
	r := str(m["$ref"])
	if r == "" {
		return ""
	}
	return r[strings.LastIndex(r, "/")+1:]
}

func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case []any:
		var parts []string
		for _, e := range x {
			parts = append(parts, text(e))
		}
		return strings.Join(parts, ", ")
	}
	return compact(v)
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func str(v any) string {
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return compact(v)
}

func strs(v any) []string {
	var out []string
	for _, e := range list(v) {
		out = append(out, str(e))
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// mountAsyncAPI serves the document of Options.AsyncAPI, when there is one: the page at
// /asyncapi, the document at /asyncapi.json and /asyncapi.yaml.
func (s *Server) mountAsyncAPI() error {
	if len(s.o.AsyncAPI) == 0 {
		return nil
	}
	d, err := parseAsyncAPI(s.o.AsyncAPI)
	if err != nil {
		return err
	}
	t, err := template.New("layout.html").ParseFS(assets, "templates/layout.html", "templates/asyncapi.html")
	if err != nil {
		return fmt.Errorf("console: template asyncapi: %w", err)
	}
	s.tmpl["asyncapi"] = t
	s.mux.HandleFunc("GET /asyncapi", func(w http.ResponseWriter, r *http.Request) {
		s.render(w, http.StatusOK, "asyncapi", map[string]any{"Title": "AsyncAPI · " + d.view.Title, "API": d.view})
	})
	serve := func(body []byte, contentType string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", contentType)
			_, _ = w.Write(body)
		}
	}
	s.mux.HandleFunc("GET /asyncapi.json", serve(d.json, "application/json"))
	s.mux.HandleFunc("GET /asyncapi.yaml", serve(d.yaml, "application/yaml"))
	return nil
}
