// Package deploy holds what running outboxd in production takes besides the
// binary: the container image builder (image/), Kubernetes manifests
// (kubernetes/), Prometheus alert rules (prometheus/) and a Grafana
// dashboard (grafana/). It is a Go module of its own so that the libraries
// its tests check those files with (Kubernetes' API types, Prometheus' rule
// and PromQL parsers, go-containerregistry) never reach outboxd's go.mod.
package deploy
