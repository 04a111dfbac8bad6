// Package asyncapi makes an AsyncAPI 3.0 document of what a settle App has mounted: one
// channel per queue (and per dead-letter and waiting queue), a receive operation per
// subscription and a send operation per registered publisher, each message with the JSON
// Schema of its Go payload type, the headers settle sets, the backend's bindings and settle's
// policies in x-settle- extension fields.
//
//	app := core.New(core.WithInfo("refunds", "0.1.0"))
//	// … mount subscriptions …
//	doc, err := asyncapi.New(app)
//	yaml, err := doc.YAML()
//
// A program hands its document to the settle CLI (settle asyncapi) through Export.
package asyncapi
