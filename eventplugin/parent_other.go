//go:build !unix && !windows

package eventplugin

// watchParent does nothing where there are no parent processes to watch (js, wasip1, plan9).
func watchParent(func(string)) {}
