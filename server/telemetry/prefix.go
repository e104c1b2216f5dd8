package telemetry

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// The prefixes of outboxd's metric names at /metrics.
const (
	// MetricPrefix starts the name of every metric of outboxd's own.
	MetricPrefix = "outboxd_"
	// DeprecatedMetricPrefix started the engine's metric names (its
	// instruments are named outbox.*) before one prefix was chosen: each
	// such metric is served under MetricPrefix and, for one release, under
	// its old name too, so that dashboards and alert rules can move
	// (docs/operations.md lists them). The next release drops the old
	// names.
	DeprecatedMetricPrefix = "outbox_"
)

// prefixed serves the metric families of its Gatherer, each whose name
// starts with DeprecatedMetricPrefix under MetricPrefix as well, its help
// saying which name is the deprecated one.
type prefixed struct{ prometheus.Gatherer }

func (p prefixed) Gather() ([]*dto.MetricFamily, error) {
	families, err := p.Gatherer.Gather()
	out := make([]*dto.MetricFamily, 0, 2*len(families))
	for _, f := range families {
		rest, ok := strings.CutPrefix(f.GetName(), DeprecatedMetricPrefix)
		if !ok {
			out = append(out, f)
			continue
		}
		current := MetricPrefix + rest
		old := proto.CloneOf(f)
		old.Help = proto.String("Deprecated alias of " + current + ", served for one release: " + f.GetHelp())
		f.Name = proto.String(current)
		out = append(out, f, old)
	}
	slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, err
}
