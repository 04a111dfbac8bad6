//go:build unix

package eventplugin

import (
	"os"
	"strconv"
	"time"
)

// parentPoll is how often a plugin process checks that its host still runs.
var parentPoll = 500 * time.Millisecond

// watchParent calls gone once the process that started this one has ended: the kernel then
// gives this process another parent (init or a subreaper), so its parent process id changes.
func watchParent(gone func(why string)) {
	ppid := os.Getppid()
	go func() {
		t := time.NewTicker(parentPoll)
		defer t.Stop()
		for range t.C {
			if now := os.Getppid(); now != ppid {
				gone("the host process " + strconv.Itoa(ppid) + " is gone (the parent is now " + strconv.Itoa(now) + ")")
				return
			}
		}
	}()
}
