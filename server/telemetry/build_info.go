package telemetry

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// BuildInfoMetric is the gauge, always 1, whose labels say which build
// serves /metrics, by the Prometheus convention <program>_build_info: a
// query joins on it to tell versions apart during a rollout.
const BuildInfoMetric = "outboxd_build_info"

// BuildInfo is what a build knows about itself, the labels of
// BuildInfoMetric.
type BuildInfo struct {
	Version   string // the release's version, else the module's
	Revision  string // the VCS revision it was built from
	GoVersion string // the Go toolchain that built it
}

// collector is BuildInfoMetric for b.
func (b BuildInfo) collector() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        BuildInfoMetric,
		Help:        "Always 1; the labels name the version, VCS revision and Go version of the outboxd build serving these metrics.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Revision, "goversion": b.GoVersion},
	})
	g.Set(1)
	return g
}

// ReportBuild adds BuildInfoMetric for build to /metrics.
func (t *Telemetry) ReportBuild(build BuildInfo) error {
	if err := t.registry.Register(build.collector()); err != nil {
		return fmt.Errorf("telemetry: %s: %w", BuildInfoMetric, err)
	}
	return nil
}
