//go:build windows

package eventplugin

import (
	"os"
	"strconv"
)

// watchParent calls gone once the process that started this one has exited (Windows does not
// re-parent processes, so the parent's handle is waited on).
func watchParent(gone func(why string)) {
	ppid := os.Getppid()
	p, err := os.FindProcess(ppid)
	if err != nil {
		gone("the host process " + strconv.Itoa(ppid) + " cannot be found: " + err.Error())
		return
	}
	go func() {
		_, _ = p.Wait()
		gone("the host process " + strconv.Itoa(ppid) + " has exited")
	}()
}
