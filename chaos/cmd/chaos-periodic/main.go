// Command chaos-periodic is the periodic-jobs trial of the chaos suite: three processes run the
// same every-second job (core/periodic) for -seconds, with the ticks claimed in one SQLite file
// (periodic.SQLClaims) or in a bucket of the suite's own nats-server (natsjs.TickClaims); twice
// the driver SIGKILLs the process that published the latest tick and starts it again 2 s later.
// Each process appends the messages it publishes to one ledger file; the trial passes when no
// tick was published twice and no gap between published ticks is longer than 2 ticks.
//
//	cd chaos && go run ./cmd/chaos-periodic -backends sqlite,nats -seconds 60
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	worker := flag.Bool("worker", false, "run as a worker (the driver starts it)")
	backend := flag.String("backend", "", "worker: sqlite or nats")
	db := flag.String("db", "", "worker: the SQLite file of the claims")
	url := flag.String("url", "", "worker: the NATS server")
	bucket := flag.String("bucket", "", "worker: the NATS bucket of the claims")
	ledger := flag.String("ledger", "", "worker: the ledger file")
	backends := flag.String("backends", "sqlite,nats", "driver: the trials to run")
	seconds := flag.Int("seconds", 60, "driver: how long each trial runs")
	dir := flag.String("dir", "", "driver: the run's directory (default: a temporary one, removed)")
	flag.Parse()
	if *worker {
		if err := runWorker(*backend, *db, *url, *bucket, *ledger); err != nil {
			fmt.Fprintln(os.Stderr, "chaos-periodic worker:", err)
			os.Exit(1)
		}
		return
	}
	runDir := *dir
	if runDir == "" {
		d, err := os.MkdirTemp("", "settle-chaos-periodic-")
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
	d := &driver{dir: runDir, self: self, seconds: *seconds}
	defer d.close()
	fmt.Print("| trial | seconds | ticks published | twice | missed | longest gap | kills | status |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	failed := false
	for _, b := range strings.Split(*backends, ",") {
		r := d.trial(strings.TrimSpace(b))
		fmt.Println(r.row())
		failed = failed || !r.ok()
	}
	if failed {
		d.close()
		os.Exit(1)
	}
}
