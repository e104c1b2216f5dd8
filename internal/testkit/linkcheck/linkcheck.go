// Package linkcheck tells a custom build's test which packages it links
// that only the broker sinks need. The broker clients are not listed by
// hand: they are what package sinks/builtin links and neither package
// sinks/builtin/nobrokers nor the command line (package cmd, which every
// custom build links) does, so a broker sink added to builtin is covered
// the day it is added.
package linkcheck

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const (
	builtin   = "github.com/outboxd/outboxd/sinks/builtin"
	nobrokers = "github.com/outboxd/outboxd/sinks/builtin/nobrokers"
	commands  = "github.com/outboxd/outboxd/cmd"
)

// deps returns the packages pkg links, outside the standard library.
func deps(t testing.TB, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// BrokerOnly returns the packages that only the broker sinks need: those
// package builtin links and neither package nobrokers nor package cmd
// does (the broker sink packages and their clients).
func BrokerOnly(t testing.TB) []string {
	t.Helper()
	without := append(deps(t, nobrokers), deps(t, commands)...)
	var only []string
	for _, p := range deps(t, builtin) {
		if p != builtin && !slices.Contains(without, p) {
			only = append(only, p)
		}
	}
	return only
}

// NoBrokerClients fails t for each package that pkg (a package pattern
// as go list takes it, "." for the test's own) links and only the broker
// sinks need.
func NoBrokerClients(t testing.TB, pkg string) {
	t.Helper()
	brokerOnly := BrokerOnly(t)
	if len(brokerOnly) == 0 {
		t.Fatal("builtin links nothing that nobrokers does not: the broker sinks are not told apart")
	}
	for _, p := range deps(t, pkg) {
		if slices.Contains(brokerOnly, p) {
			t.Errorf("the build links %s, which only the broker sinks need", p)
		}
	}
}
