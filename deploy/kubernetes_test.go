package deploy_test

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
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
)

// manifests are the objects of deploy/kubernetes, decoded strictly.
type manifests struct {
	deployment *appsv1.Deployment
	configMap  *corev1.ConfigMap
	secret     *corev1.Secret
	pdb        *policyv1.PodDisruptionBudget
	service    *corev1.Service
}

// kinds makes an empty object of each kind the deploy files may hold, by
// "apiVersion kind".
var kinds = map[string]func() any{
	"apps/v1 Deployment":                      func() any { return &appsv1.Deployment{} },
	"v1 ConfigMap":                            func() any { return &corev1.ConfigMap{} },
	"v1 Secret":                               func() any { return &corev1.Secret{} },
	"policy/v1 PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"v1 Service":                              func() any { return &corev1.Service{} },
	"batch/v1 Job":                            func() any { return &batchv1.Job{} },
	"networking.k8s.io/v1 NetworkPolicy":      func() any { return &networkingv1.NetworkPolicy{} },
	"monitoring.coreos.com/v1 ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1 PrometheusRule": func() any { return &monitoringv1.PrometheusRule{} },
	"v1 ServiceAccount":                       func() any { return &corev1.ServiceAccount{} },
	"networking.k8s.io/v1 Ingress":            func() any { return &networkingv1.Ingress{} },
}

// object is one decoded document: its "apiVersion kind" and its value (a
// pointer to the k8s.io/api or prometheus-operator type).
type object struct {
	kind string
	obj  any
}

// decodeStrictly decodes every YAML document of raw (from source) into its
// Go type; an unknown or duplicated field or an unexpected kind fails the
// test.
func decodeStrictly(t *testing.T, source string, raw []byte) []object {
	t.Helper()
	var objects []object
	for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(raw), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%s document %d: %v", source, i, err)
		}
		if meta.Kind == "" { // comments only
			continue
		}
		kind := meta.APIVersion + " " + meta.Kind
		newObj, known := kinds[kind]
		if !known {
			t.Fatalf("%s document %d: unexpected %s", source, i, kind)
		}
		obj := newObj()
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s document %d (%s): %v", source, i, meta.Kind, err)
		}
		objects = append(objects, object{kind, obj})
	}
	return objects
}

// loadManifests decodes every document of kubernetes/*.yaml strictly and
// wants one each of the kinds in manifests.
func loadManifests(t *testing.T) manifests {
	t.Helper()
	m := manifests{}
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	seen := map[string]bool{}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range decodeStrictly(t, file, raw) {
			if seen[o.kind] {
				t.Fatalf("%s: a second %s", file, o.kind)
			}
			seen[o.kind] = true
			switch v := o.obj.(type) {
			case *appsv1.Deployment:
				m.deployment = v
			case *corev1.ConfigMap:
				m.configMap = v
			case *corev1.Secret:
				m.secret = v
			case *policyv1.PodDisruptionBudget:
				m.pdb = v
			case *corev1.Service:
				m.service = v
			default:
				t.Fatalf("%s: unexpected %s", file, o.kind)
			}
		}
	}
	if m.deployment == nil || m.configMap == nil || m.secret == nil || m.pdb == nil || m.service == nil {
		t.Fatalf("found %v; want one each of Deployment, ConfigMap, Secret, PodDisruptionBudget and Service", slices.Sorted(maps.Keys(seen)))
	}
	return m
}

// TestKubernetesManifestsDecodeStrictly: the strict decoding itself, and
// that a field the API does not know would have failed it.
func TestKubernetesManifestsDecodeStrictly(t *testing.T) {
	loadManifests(t)
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict([]byte("apiVersion: apps/v1\nkind: Deployment\nspec: {replica: 2}\n"), &d); err == nil {
		t.Fatal("a misspelt field decoded without error: the check would not catch typos")
	}
}

// TestKubernetesDeployment checks what the pods need to run safely as two
// replicas: migrations before serve, the ConfigMap's plugins.yaml, the
// Secret's variables, probes on /readyz and /healthz, a grace period above
// relay.shutdown_timeout, resource requests, non-root, scraping, and a
// PodDisruptionBudget that covers them.
func TestKubernetesDeployment(t *testing.T) {
	m := loadManifests(t)
	d := m.deployment
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	if len(pod.InitContainers) != 1 || !slices.Contains(pod.InitContainers[0].Args, "migrate") {
		t.Errorf("want one init container running migrate, got %+v", pod.InitContainers)
	}
	if len(pod.Containers) != 1 || !slices.Contains(pod.Containers[0].Args, "serve") {
		t.Fatalf("want one container running serve, got %+v", pod.Containers)
	}
	serve := pod.Containers[0]
	for _, c := range append([]corev1.Container{serve}, pod.InitContainers...) {
		if !slices.Contains(c.Args, "/etc/outboxd/plugins.yaml") || len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/outboxd" {
			t.Errorf("%s: does not read plugins.yaml from the config volume at /etc/outboxd", c.Name)
		}
		if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != m.secret.Name {
			t.Errorf("%s: does not take its environment from Secret %s", c.Name, m.secret.Name)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("%s: no cpu and memory requests", c.Name)
		}
		if c.SecurityContext == nil || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
			t.Errorf("%s: privilege escalation not disabled", c.Name)
		}
	}
	if len(pod.Volumes) != 1 || pod.Volumes[0].ConfigMap == nil || pod.Volumes[0].ConfigMap.Name != m.configMap.Name {
		t.Errorf("the config volume is not ConfigMap %s", m.configMap.Name)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Error("pods may run as root")
	}
	port := serve.Ports[0]
	for probe, want := range map[*corev1.Probe]string{serve.ReadinessProbe: "/readyz", serve.LivenessProbe: "/healthz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Port.String() != port.Name {
			t.Errorf("probe %+v, want GET %s on port %s", probe, want, port.Name)
		}
	}

	cfg := pluginsConfig(t, m)
	if !strings.HasSuffix(cfg.HTTP.Listen, ":"+strconv.Itoa(int(port.ContainerPort))) {
		t.Errorf("http.listen %s does not match container port %d", cfg.HTTP.Listen, port.ContainerPort)
	}
	shutdown, err := time.ParseDuration(cfg.Relay.ShutdownTimeout)
	if err != nil {
		t.Fatalf("relay.shutdown_timeout: %v", err)
	}
	// After the relay drains, the HTTP server and the telemetry flush each
	// get up to 10 s (cmd.HTTPShutdownTimeout, cmd.TelemetryShutdownTimeout).
	grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	if grace <= shutdown+10*time.Second {
		t.Errorf("terminationGracePeriodSeconds %s leaves no room above relay.shutdown_timeout %s", grace, shutdown)
	}

	ann := d.Spec.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/path"] != "/metrics" || ann["prometheus.io/port"] != strconv.Itoa(int(port.ContainerPort)) {
		t.Errorf("scrape annotations %v do not point at /metrics on port %d", ann, port.ContainerPort)
	}
	podLabels := labels.Set(d.Spec.Template.Labels)
	pdbSelector, err := metav1.LabelSelectorAsSelector(m.pdb.Spec.Selector)
	if err != nil || !pdbSelector.Matches(podLabels) {
		t.Errorf("the PodDisruptionBudget does not select the pods: %v", err)
	}
	if m.pdb.Spec.MinAvailable == nil || m.pdb.Spec.MinAvailable.IntValue() < 1 || m.pdb.Spec.MinAvailable.IntValue() >= int(*d.Spec.Replicas) {
		t.Errorf("PodDisruptionBudget minAvailable %v: want at least one pod kept and one drainable", m.pdb.Spec.MinAvailable)
	}
	if !labels.SelectorFromSet(m.service.Spec.Selector).Matches(podLabels) {
		t.Error("the Service does not select the pods")
	}
}

// pluginsYAML is what the manifests test reads of plugins.yaml.
type pluginsYAML struct {
	HTTP  struct{ Listen string }
	Relay struct {
		ShutdownTimeout string `json:"shutdown_timeout"`
	}
}

func pluginsConfig(t *testing.T, m manifests) pluginsYAML {
	t.Helper()
	var cfg pluginsYAML
	if err := yaml.Unmarshal([]byte(m.configMap.Data["plugins.yaml"]), &cfg); err != nil {
		t.Fatalf("ConfigMap plugins.yaml: %v", err)
	}
	return cfg
}

// TestKubernetesConfigChecks runs `outboxd config check` on the ConfigMap's
// plugins.yaml with the Secret's variables set, as the pods will, and
// without them, which must fail: the secrets come from the Secret.
func TestKubernetesConfigChecks(t *testing.T) {
	m := loadManifests(t)
	file := filepath.Join(t.TempDir(), "plugins.yaml")
	if err := os.WriteFile(file, []byte(m.configMap.Data["plugins.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	var env []string
	for k, v := range m.secret.StringData {
		env = append(env, k+"="+v)
	}
	check := func(env []string) (string, int) {
		cmd := exec.Command(binary, "--config", file, "config", "check")
		cmd.Env = proc.Environ(env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if err != nil && cmd.ProcessState == nil {
			t.Fatal(err)
		}
		return out.String(), cmd.ProcessState.ExitCode()
	}
	if out, code := check(env); code != 0 || !strings.Contains(out, "is valid") {
		t.Fatalf("config check with the Secret's variables: exit %d\n%s", code, out)
	}
	if out, code := check(nil); code != 2 || !strings.Contains(out, "DATABASE_URL") {
		t.Fatalf("config check without the Secret: exit %d, want 2 naming a missing variable\n%s", code, out)
	}
}
