// Command chaos-inbox is the inbox trial of the chaos suite: consumers behind an inbox
// (core/inbox) on SQLite, SIGKILLed between the inbox's commit and the acknowledgement, on the
// suite's own RabbitMQ node (a classic and a quorum queue) and nats-server. Each trial seeds
// -messages messages with ids, runs a worker that writes each message's id into a side table
// through the inbox's transaction and kills itself after the commit of about one message in
// -kill-every (and is SIGKILLed by the driver at random moments too), restarts it until the
// queue is drained, and checks that the side table holds every id exactly once.
//
//	cd chaos && go run ./cmd/chaos-inbox -backends classic,quorum,nats -messages 5000
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	worker := flag.Bool("worker", false, "run as the worker (the driver starts it)")
	backend := flag.String("backend", "", "worker: classic, quorum or nats")
	url := flag.String("url", "", "worker: the server's URL")
	queue := flag.String("queue", "", "worker: the queue")
	db := flag.String("db", "", "worker: the SQLite file")
	killEvery := flag.Int("kill-every", 50, "kill the worker after the commit of about one message in this many (0: never)")
	gen := flag.Uint64("generation", 0, "worker: its start count")
	backends := flag.String("backends", "classic,quorum,nats", "driver: the trials to run")
	messages := flag.Int("messages", 5000, "driver: messages per trial")
	dir := flag.String("dir", "", "driver: the run's directory (default: a temporary one, removed)")
	flag.Parse()
	if *worker {
		if err := runWorker(workerConfig{backend: *backend, url: *url, queue: *queue, db: *db, killEvery: *killEvery, generation: *gen}); err != nil {
			fmt.Fprintln(os.Stderr, "chaos-inbox worker:", err)
			os.Exit(1)
		}
		return
	}
	runDir := *dir
	if runDir == "" {
		d, err := os.MkdirTemp("", "settle-chaos-inbox-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer os.RemoveAll(d)
		runDir = d
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	d := &driver{dir: runDir, self: self, messages: *messages, killEvery: *killEvery, start: time.Now()}
	defer d.close()
	failed := false
	fmt.Printf("| trial | messages | kills (self, driver) | side rows | ids once | lost | twice | duplicates acked | time | status |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, b := range strings.Split(*backends, ",") {
		r := d.trial(strings.TrimSpace(b), filepath.Join(runDir, b))
		fmt.Println(r.row())
		failed = failed || !r.ok()
	}
	if failed {
		d.close() // os.Exit skips the deferred calls
		os.Exit(1)
	}
}
