package deploy_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testenv"
)

const (
	chartDir = "helm/outboxd"
	// release is the release name the tests render the chart as.
	release = "shop"
)

// recommendedLabels are the app.kubernetes.io labels every object of the
// chart and the manifests carries.
var recommendedLabels = []string{
	"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
	"app.kubernetes.io/component", "app.kubernetes.io/part-of", "app.kubernetes.io/managed-by",
}

// allToggles turns on every optional object of the chart.
var allToggles = []string{
	"--set", "serviceMonitor.enabled=true,prometheusRule.enabled=true,grafanaDashboard.enabled=true,networkPolicy.enabled=true,ingress.enabled=true",
	"--set", "networkPolicy.egress[0].to[0].ipBlock.cidr=10.0.0.0/8",
}

// helmBinary is Helm v3, built from the Go module proxy by scripts/tools.sh
// (tools/helm/go.mod) on first use and cached.
var helmBinary = sync.OnceValues(func() (string, error) { return proc.PinnedTool("helm") })

// helm runs the pinned Helm with args; a Helm that cannot be built skips
// the test (fails it in CI).
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin, err := helmBinary()
	if err != nil {
		testenv.SkipOrFail(t, fmt.Sprintf("helm is not built: %v", err))
	}
	cmd := exec.Command(bin, args...)
	// Helm keeps no state the tests need: caches and configuration go to
	// the test's directory, not the developer's.
	home := t.TempDir()
	cmd.Env = proc.Environ("HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// rendered are the objects `helm template` makes of the chart.
type rendered struct {
	deployment     *appsv1.Deployment
	configMap      *corev1.ConfigMap // plugins.yaml of the relays
	migrateConfig  *corev1.ConfigMap // plugins.yaml of the migration hook
	dashboard      *corev1.ConfigMap
	service        *corev1.Service
	pdb            *policyv1.PodDisruptionBudget
	job            *batchv1.Job
	networkPolicy  *networkingv1.NetworkPolicy
	serviceMonitor *monitoringv1.ServiceMonitor
	rule           *monitoringv1.PrometheusRule
	serviceAccount *corev1.ServiceAccount
	ingress        *networkingv1.Ingress
	all            []metav1.Object
}

// renderChart runs `helm template` with args and decodes every object
// strictly, as the manifests are.
func renderChart(t *testing.T, args ...string) rendered {
	t.Helper()
	out, err := helm(t, append([]string{"template", release, chartDir}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var r rendered
	for _, o := range decodeStrictly(t, "helm template "+strings.Join(args, " "), []byte(out)) {
		meta, ok := o.obj.(metav1.Object)
		if !ok {
			t.Fatalf("%s has no object metadata", o.kind)
		}
		r.all = append(r.all, meta)
		if !r.keep(o.obj) {
			t.Fatalf("unexpected or second %s %s", o.kind, meta.GetName())
		}
	}
	if r.deployment == nil || r.configMap == nil || r.service == nil {
		t.Fatalf("no Deployment, ConfigMap or Service in the chart's output")
	}
	return r
}

// keep stores obj in its field of r, reporting false when obj is of no
// field's kind (or name, for a ConfigMap) or the field is already set.
func (r *rendered) keep(obj any) bool {
	switch v := obj.(type) {
	case *appsv1.Deployment:
		return set(&r.deployment, v)
	case *corev1.Service:
		return set(&r.service, v)
	case *policyv1.PodDisruptionBudget:
		return set(&r.pdb, v)
	case *batchv1.Job:
		return set(&r.job, v)
	case *networkingv1.NetworkPolicy:
		return set(&r.networkPolicy, v)
	case *monitoringv1.ServiceMonitor:
		return set(&r.serviceMonitor, v)
	case *monitoringv1.PrometheusRule:
		return set(&r.rule, v)
	case *corev1.ServiceAccount:
		return set(&r.serviceAccount, v)
	case *networkingv1.Ingress:
		return set(&r.ingress, v)
	case *corev1.ConfigMap:
		switch v.Name {
		case release + "-outboxd":
			return set(&r.configMap, v)
		case release + "-outboxd-migrate":
			return set(&r.migrateConfig, v)
		case release + "-outboxd-dashboard":
			return set(&r.dashboard, v)
		}
	}
	return false
}

// set stores v in *field unless it is already set.
func set[T any](field **T, v *T) bool {
	if *field != nil {
		return false
	}
	*field = v
	return true
}

// chartAppVersion is the appVersion of Chart.yaml.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(raw, &chart); err != nil || chart.AppVersion == "" || chart.AppVersion == "latest" {
		t.Fatalf("Chart.yaml appVersion %q: %v", chart.AppVersion, err)
	}
	return chart.AppVersion
}

// TestHelmLint runs Helm's own linter, strict (warnings fail), on the
// chart with its default values and with every toggle on.
// Mutation: a template referring to a value that is not in values.yaml
// (strict lint fails on it) makes this fail.
func TestHelmLint(t *testing.T) {
	t.Parallel()
	for name, args := range map[string][]string{"defaults": nil, "toggles on": allToggles} {
		if out, err := helm(t, append([]string{"lint", "--strict", chartDir}, args...)...); err != nil {
			t.Errorf("%s: %v", name, err)
		} else if !strings.Contains(out, "0 chart(s) failed") {
			t.Errorf("%s: helm lint says\n%s", name, out)
		}
	}
}

// TestHelmChartDefaults renders the chart with its default values and
// checks what the relays need: two replicas spread across nodes, the image
// of the chart's appVersion, plugins.yaml from the ConfigMap with its
// checksum on the pods, the environment from the existing Secret (the
// chart makes none), probes, resources, a PodDisruptionBudget, the
// migration Job as a pre-install and pre-upgrade hook, the recommended
// labels on every object, and none of the optional objects (a Secret, or
// any other kind, would fail renderChart).
// Mutation: dropping the checksum annotation, the hook annotation, the
// topology spread, a recommended label or defaulting the tag to "latest"
// makes this fail.
func TestHelmChartDefaults(t *testing.T) {
	t.Parallel()
	r := renderChart(t)
	appVersion := chartAppVersion(t)
	d := r.deployment
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(pod.Containers))
	}
	serve := pod.Containers[0]
	if !slices.Equal(serve.Args[:3], []string{"--config", "/etc/outboxd/plugins.yaml", "serve"}) {
		t.Errorf("container args %v do not serve plugins.yaml", serve.Args)
	}
	podLabels := labels.Set(d.Spec.Template.Labels)

	// The image: the chart's appVersion, never latest.
	for _, c := range append([]corev1.Container{serve}, r.job.Spec.Template.Spec.Containers...) {
		if !strings.HasSuffix(c.Image, ":"+appVersion) {
			t.Errorf("%s: image %s, want tag %s (the chart's appVersion)", c.Name, c.Image, appVersion)
		}
		if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != "outboxd-secrets" {
			t.Errorf("%s: does not take its environment from the existing Secret outboxd-secrets", c.Name)
		}
		if c.SecurityContext == nil || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
			t.Errorf("%s: privilege escalation not disabled", c.Name)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: no cpu and memory requests and memory limit", c.Name)
		}
	}
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Error("pods may run as root")
	}

	// plugins.yaml and its checksum.
	plugins := r.configMap.Data["plugins.yaml"]
	sum := sha256.Sum256([]byte(strings.TrimSuffix(plugins, "\n")))
	if got := d.Spec.Template.Annotations["checksum/config"]; got != hex.EncodeToString(sum[:]) {
		t.Errorf("checksum/config %q is not the sha256 of the ConfigMap's plugins.yaml", got)
	}
	if len(pod.Volumes) != 1 || pod.Volumes[0].ConfigMap == nil || pod.Volumes[0].ConfigMap.Name != r.configMap.Name {
		t.Errorf("the config volume is not ConfigMap %s", r.configMap.Name)
	}

	// Probes, port and scraping.
	port := serve.Ports[0]
	for probe, want := range map[*corev1.Probe]string{serve.ReadinessProbe: "/readyz", serve.LivenessProbe: "/healthz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Port.String() != port.Name {
			t.Errorf("probe %+v, want GET %s on port %s", probe, want, port.Name)
		}
	}
	var cfg pluginsYAML
	if err := yaml.Unmarshal([]byte(plugins), &cfg); err != nil {
		t.Fatalf("plugins.yaml: %v", err)
	}
	if !strings.HasSuffix(cfg.HTTP.Listen, ":"+strconv.Itoa(int(port.ContainerPort))) {
		t.Errorf("http.listen %s does not match container port %d", cfg.HTTP.Listen, port.ContainerPort)
	}
	shutdown, err := time.ParseDuration(cfg.Relay.ShutdownTimeout)
	if err != nil {
		t.Fatalf("relay.shutdown_timeout: %v", err)
	}
	if grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second; grace <= shutdown+10*time.Second {
		t.Errorf("terminationGracePeriodSeconds %s leaves no room above relay.shutdown_timeout %s", grace, shutdown)
	}
	if d.Spec.Template.Annotations["prometheus.io/scrape"] != "true" {
		t.Error("without a ServiceMonitor the pods have no scrape annotations")
	}

	// Spread across nodes, selecting the relays.
	spread := slices.IndexFunc(pod.TopologySpreadConstraints, func(c corev1.TopologySpreadConstraint) bool {
		return c.TopologyKey == "kubernetes.io/hostname"
	})
	if spread < 0 {
		t.Fatal("no topology spread across nodes (kubernetes.io/hostname)")
	}
	if sel, err := metav1.LabelSelectorAsSelector(pod.TopologySpreadConstraints[spread].LabelSelector); err != nil || !sel.Matches(podLabels) {
		t.Errorf("the topology spread does not select the pods: %v", err)
	}

	// The PodDisruptionBudget and the Service select the relays, not the
	// migration Job's pod.
	pdbSelector, err := metav1.LabelSelectorAsSelector(r.pdb.Spec.Selector)
	if err != nil || !pdbSelector.Matches(podLabels) || pdbSelector.Matches(labels.Set(r.job.Spec.Template.Labels)) {
		t.Errorf("the PodDisruptionBudget does not select exactly the relays: %v", err)
	}
	if r.pdb.Spec.MinAvailable == nil || r.pdb.Spec.MinAvailable.IntValue() < 1 || r.pdb.Spec.MinAvailable.IntValue() >= int(*d.Spec.Replicas) {
		t.Errorf("PodDisruptionBudget minAvailable %v: want at least one pod kept and one drainable", r.pdb.Spec.MinAvailable)
	}
	service := labels.SelectorFromSet(r.service.Spec.Selector)
	if !service.Matches(podLabels) || service.Matches(labels.Set(r.job.Spec.Template.Labels)) {
		t.Error("the Service does not select exactly the relays")
	}

	// The migration hook and its own copy of plugins.yaml, made first.
	if r.job == nil || r.migrateConfig == nil {
		t.Fatal("no migration Job and ConfigMap")
	}
	if got := r.job.Annotations["helm.sh/hook"]; got != "pre-install,pre-upgrade" {
		t.Errorf("the migration Job's helm.sh/hook is %q, want pre-install,pre-upgrade", got)
	}
	configWeight, err1 := strconv.Atoi(r.migrateConfig.Annotations["helm.sh/hook-weight"])
	jobWeight, err2 := strconv.Atoi(r.job.Annotations["helm.sh/hook-weight"])
	if got := r.migrateConfig.Annotations["helm.sh/hook"]; got != "pre-install,pre-upgrade" || err1 != nil || err2 != nil || configWeight >= jobWeight {
		t.Errorf("the migration's ConfigMap is not a hook made before the Job: %v", r.migrateConfig.Annotations)
	}
	if r.migrateConfig.Data["plugins.yaml"] != plugins {
		t.Error("the migration Job reads another plugins.yaml than the relays")
	}
	migrate := r.job.Spec.Template.Spec
	if len(migrate.Containers) != 1 || !slices.Contains(migrate.Containers[0].Args, "migrate") || migrate.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("the Job does not run migrate once: %+v", migrate.Containers)
	}

	// Labels, and nothing optional.
	for _, o := range r.all {
		for _, label := range recommendedLabels {
			if o.GetLabels()[label] == "" {
				t.Errorf("%s: no label %s", o.GetName(), label)
			}
		}
		if v := o.GetLabels()["app.kubernetes.io/version"]; v != "" && v != appVersion {
			t.Errorf("%s: app.kubernetes.io/version %s, want %s", o.GetName(), v, appVersion)
		}
	}
	if r.networkPolicy != nil || r.serviceMonitor != nil || r.rule != nil || r.dashboard != nil || r.ingress != nil {
		t.Error("an optional object is rendered with the default values")
	}
}

// TestHelmChartToggles renders the chart with every toggle on: the
// ServiceMonitor scrapes the Service's port, the PrometheusRule holds
// exactly deploy/prometheus/alerts.yaml's groups, the dashboard ConfigMap
// exactly deploy/grafana/outboxd.json, and the NetworkPolicy selects the
// relays, lets in only their HTTP port and lets out DNS and the given
// rules. Without a ServiceMonitor's scraping the pods' scrape annotations
// are off, so nothing scrapes them twice.
// Mutation: a PrometheusRule template that drops a group, a ServiceMonitor
// on another port, or a NetworkPolicy without the DNS rule makes this fail.
func TestHelmChartToggles(t *testing.T) {
	t.Parallel()
	r := renderChart(t, allToggles...)
	if r.serviceMonitor == nil || r.rule == nil || r.dashboard == nil || r.networkPolicy == nil {
		t.Fatal("a toggle did not render its object")
	}
	podLabels := labels.Set(r.deployment.Spec.Template.Labels)
	if _, on := r.deployment.Spec.Template.Annotations["prometheus.io/scrape"]; on {
		t.Error("pods keep scrape annotations beside a ServiceMonitor")
	}

	sm := r.serviceMonitor.Spec
	if sel, err := metav1.LabelSelectorAsSelector(&sm.Selector); err != nil || !sel.Matches(labels.Set(r.service.Labels)) {
		t.Errorf("the ServiceMonitor does not select the Service: %v", err)
	}
	if len(sm.Endpoints) != 1 || sm.Endpoints[0].Port != r.service.Spec.Ports[0].Name || sm.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v, want /metrics on port %s", sm.Endpoints, r.service.Spec.Ports[0].Name)
	}

	if !reflect.DeepEqual(r.rule.Spec, alertsAsRuleSpec(t)) {
		t.Errorf("the PrometheusRule's spec is not %s's rules", alertsFile)
	}
	dashboard, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.dashboard.Data["outboxd.json"]; got != string(dashboard) || r.dashboard.Labels["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard ConfigMap does not hold %s under the grafana_dashboard label", dashboardFile)
	}

	np := r.networkPolicy.Spec
	if sel, err := metav1.LabelSelectorAsSelector(&np.PodSelector); err != nil || !sel.Matches(podLabels) {
		t.Errorf("the NetworkPolicy does not select the relays: %v", err)
	}
	if len(np.Ingress) != 1 || len(np.Ingress[0].Ports) != 1 || np.Ingress[0].Ports[0].Port.String() != "http" {
		t.Errorf("NetworkPolicy ingress %+v, want the http port only", np.Ingress)
	}
	if !slices.Contains(np.PolicyTypes, networkingv1.PolicyTypeEgress) || len(np.Egress) != 2 ||
		np.Egress[0].Ports[0].Port.IntValue() != 53 || np.Egress[1].To[0].IPBlock == nil {
		t.Errorf("NetworkPolicy egress %+v, want DNS and the given rule", np.Egress)
	}
}

// alertsAsRuleSpec is deploy/prometheus/alerts.yaml as a PrometheusRule's
// spec, decoded strictly.
func alertsAsRuleSpec(t *testing.T) monitoringv1.PrometheusRuleSpec {
	t.Helper()
	var spec monitoringv1.PrometheusRuleSpec
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, &spec); err != nil {
		t.Fatalf("%s as a PrometheusRule spec: %v", alertsFile, err)
	}
	return spec
}

// TestHelmChartConfigRollsPods: a change of the configuration changes the
// pods' checksum annotation (so `helm upgrade` rolls them), an unchanged
// one keeps it; image.tag overrides the appVersion, "latest" is refused
// naming the value, and no existingSecret is refused naming the key.
// Mutation: a checksum over something other than the configuration, or
// removing the "latest" check, makes this fail.
func TestHelmChartConfigRollsPods(t *testing.T) {
	t.Parallel()
	checksum := func(args ...string) string {
		return renderChart(t, args...).deployment.Spec.Template.Annotations["checksum/config"]
	}
	base := checksum()
	if again := checksum("--set", "replicaCount=3"); again != base {
		t.Error("the checksum changed with the configuration unchanged")
	}
	if changed := checksum("--set", "config.relay.poll_interval=2s"); changed == base {
		t.Error("the checksum did not change with the configuration")
	}
	if img := renderChart(t, "--set", "image.tag=v9.9.9").deployment.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":v9.9.9") {
		t.Errorf("image.tag v9.9.9 gave image %s", img)
	}
	for value, want := range map[string]string{"image.tag=latest": "image.tag", "existingSecret=": "existingSecret"} {
		_, err := helm(t, "template", release, chartDir, "--set", value)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--set %s: %v, want an error naming %s", value, err, want)
		}
	}
}

// deployGuide is the guide whose `kubectl create secret` command names
// the keys of the chart's existing Secret.
const deployGuide = "../docs/deploy.md"

// documentedSecretKeys are the keys the guide's `kubectl create secret`
// puts in the chart's Secret (its --from-literal=KEY=... flags).
func documentedSecretKeys(t *testing.T) []string {
	t.Helper()
	guide, err := os.ReadFile(deployGuide)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, m := range regexp.MustCompile(`--from-literal=([A-Za-z_][A-Za-z0-9_]*)=`).FindAllSubmatch(guide, -1) {
		keys = append(keys, string(m[1]))
	}
	if len(keys) == 0 {
		t.Fatalf("%s creates no Secret with --from-literal", deployGuide)
	}
	return keys
}

// TestHelmChartConfigChecks runs `outboxd config check` on the chart's
// plugins.yaml with the variables the guide's Secret holds, as the pods
// will, and refuses any warning about them (a deprecated OUTBOX_ name).
// Mutations, each failing this test: a default config naming a ${VAR}
// the documented Secret keys lack, or an invalid key; the chart or the
// guide back at OUTBOX_HTTP_TOKEN (deprecated, or a variable the other
// does not set).
func TestHelmChartConfigChecks(t *testing.T) {
	t.Parallel()
	r := renderChart(t)
	file := filepath.Join(t.TempDir(), "plugins.yaml")
	if err := os.WriteFile(file, []byte(r.configMap.Data["plugins.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, key := range documentedSecretKeys(t) {
		value := "a-long-random-value"
		if key == "DATABASE_URL" {
			value = "postgres://outboxd@postgres:5432/app"
		}
		env = append(env, key+"="+value)
	}
	cmd := exec.Command(binary, "--config", file, "config", "check")
	cmd.Env = proc.Environ(env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "is valid") {
		t.Fatalf("config check of the chart's plugins.yaml with %v: %v\n%s", env, err, out)
	}
	if strings.Contains(strings.ToLower(string(out)), "warning") || strings.Contains(string(out), "deprecated") {
		t.Errorf("config check of the chart's plugins.yaml with %v warns:\n%s", env, out)
	}
}

// TestManifestsLabelsAndImageTag: the plain manifests carry the
// recommended labels on every object and the pods, and their image is the
// chart's appVersion, never latest.
// Mutation: an image back at :latest, or a label removed, makes this fail.
func TestManifestsLabelsAndImageTag(t *testing.T) {
	m := loadManifests(t)
	appVersion := chartAppVersion(t)
	objects := []metav1.Object{m.deployment, m.configMap, m.secret, m.pdb, m.service, &m.deployment.Spec.Template.ObjectMeta}
	for _, o := range objects {
		for _, label := range recommendedLabels {
			if o.GetLabels()[label] == "" {
				t.Errorf("%s %s: no label %s", reflect.TypeOf(o).Elem().Name(), o.GetName(), label)
			}
		}
	}
	pod := m.deployment.Spec.Template.Spec
	for _, c := range append(pod.Containers, pod.InitContainers...) {
		if !strings.HasSuffix(c.Image, ":"+appVersion) {
			t.Errorf("%s: image %s, want tag %s (the chart's appVersion)", c.Name, c.Image, appVersion)
		}
	}
	if !slices.ContainsFunc(pod.TopologySpreadConstraints, func(c corev1.TopologySpreadConstraint) bool {
		return c.TopologyKey == "kubernetes.io/hostname"
	}) {
		t.Error("the manifests' pods are not spread across nodes")
	}
}
