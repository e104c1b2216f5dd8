package deploy_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/server/portal"
)

// TestHelmSchemaRefusesUnknownValues: values.schema.json refuses a
// misspelt value at every level whose keys the chart fixes, in `helm lint
// --strict` and `helm template` alike, naming the key (a threshold that
// reads as no number too); an alert name that alerts.yaml does not have
// is refused by the template, naming it.
// Mutation: removing "additionalProperties": false from the schema's top
// level (replicaCont passes) or from serviceAccount (automunt passes), or
// the template's check of the alert names, makes this fail.
func TestHelmSchemaRefusesUnknownValues(t *testing.T) {
	t.Parallel()
	for value, want := range map[string]string{
		"replicaCont=3":                                       "replicaCont",
		"serviceAccount.automunt=true":                        "automunt",
		"ingress.hosts[0].paths[0].pathTyp=Prefix":            "pathTyp",
		"secretsKey.secret=x":                                 "secret",
		"prometheusRule.rules.OutboxdDeadLetters.treshold=1":  "treshold",
		"prometheusRule.rules.OutboxdDeadLetters.threshold=x": "threshold",
	} {
		for _, cmd := range [][]string{{"lint", "--strict", chartDir}, {"template", release, chartDir}} {
			_, err := helm(t, append(cmd, "--set", value)...)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("helm %s --set %s: %v, want an error naming %s", cmd[0], value, err, want)
			}
		}
	}
	// The alert names are alerts.yaml's, which the template checks (helm
	// lint reports no template's fail()).
	_, err := helm(t, "template", release, chartDir, "--set", "prometheusRule.rules.OutboxdDeadLeters.enabled=true")
	if err == nil || !strings.Contains(err.Error(), "OutboxdDeadLeters: no such alert") {
		t.Errorf("a misspelt alert name: %v, want an error naming it", err)
	}
}

// TestHelmChartServiceAccount: by default the chart makes a service
// account for the relays and the migration Job, with no token mounted;
// serviceAccount.name with create false uses an existing account, and
// automount and annotations reach the account and the pods.
// Mutation: a pod spec without serviceAccountName, or automount hard-coded
// to false, makes this fail.
func TestHelmChartServiceAccount(t *testing.T) {
	t.Parallel()
	r := renderChart(t)
	if r.serviceAccount == nil {
		t.Fatal("no ServiceAccount with the default values")
	}
	sa := r.serviceAccount
	for _, pod := range []corev1.PodSpec{r.deployment.Spec.Template.Spec, r.job.Spec.Template.Spec} {
		if pod.ServiceAccountName != sa.Name || pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			t.Errorf("pod account %q automount %v, want %s without its token", pod.ServiceAccountName, pod.AutomountServiceAccountToken, sa.Name)
		}
	}
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Error("the ServiceAccount mounts its token by default")
	}

	r = renderChart(t, "--set", "serviceAccount.automount=true", "--set", "serviceAccount.annotations.iam\\.example\\.com/role=outboxd")
	if pod := r.deployment.Spec.Template.Spec; pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken {
		t.Error("serviceAccount.automount=true does not mount the token")
	}
	if r.serviceAccount.Annotations["iam.example.com/role"] != "outboxd" {
		t.Errorf("ServiceAccount annotations %v", r.serviceAccount.Annotations)
	}

	r = renderChart(t, "--set", "serviceAccount.create=false,serviceAccount.name=shared")
	if r.serviceAccount != nil || r.deployment.Spec.Template.Spec.ServiceAccountName != "shared" || r.job.Spec.Template.Spec.ServiceAccountName != "shared" {
		t.Errorf("create=false name=shared: account object %v, pods use %q", r.serviceAccount != nil, r.deployment.Spec.Template.Spec.ServiceAccountName)
	}
}

// TestHelmChartSecretsKey: OUTBOXD_SECRETS_KEY comes from the existing
// Secret's key of that name by default (optional: a relay without it runs
// with destinations and the portal off), or from the Secret and key
// secretsKey names, in the relays and the migration Job alike.
// Mutation: a template ignoring secretsKey.existingSecret or .key, or
// leaving the migration container without the variable, makes this fail.
func TestHelmChartSecretsKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args        []string
		secret, key string
		optional    bool
	}{
		{nil, "outboxd-secrets", destinations.EnvSecretsKey, true},
		{[]string{"--set", "secretsKey.existingSecret=outboxd-keyring,secretsKey.key=keys,secretsKey.optional=false"}, "outboxd-keyring", "keys", false},
	} {
		r := renderChart(t, c.args...)
		for _, container := range append(r.deployment.Spec.Template.Spec.Containers, r.job.Spec.Template.Spec.Containers...) {
			i := slices.IndexFunc(container.Env, func(e corev1.EnvVar) bool { return e.Name == destinations.EnvSecretsKey })
			if i < 0 || container.Env[i].ValueFrom == nil || container.Env[i].ValueFrom.SecretKeyRef == nil {
				t.Errorf("%v: %s has no %s from a Secret", c.args, container.Name, destinations.EnvSecretsKey)
				continue
			}
			ref := container.Env[i].ValueFrom.SecretKeyRef
			if ref.Name != c.secret || ref.Key != c.key || ref.Optional == nil || *ref.Optional != c.optional {
				t.Errorf("%v: %s takes %s from %s/%s (optional %v), want %s/%s (optional %v)",
					c.args, container.Name, destinations.EnvSecretsKey, ref.Name, ref.Key, ref.Optional, c.secret, c.key, c.optional)
			}
		}
	}
}

// ingressRoutes reports whether one of ing's rules sends path to service's
// http port (Prefix paths match whole segments, as Kubernetes says).
func ingressRoutes(ing *networkingv1.Ingress, service *corev1.Service, path string) bool {
	for _, rule := range ing.Spec.Rules {
		for _, p := range rule.HTTP.Paths {
			if p.Backend.Service == nil || p.Backend.Service.Name != service.Name || p.Backend.Service.Port.Name != service.Spec.Ports[0].Name {
				continue
			}
			prefix := strings.TrimSuffix(p.Path, "/")
			switch *p.PathType {
			case networkingv1.PathTypeExact:
				if path == p.Path {
					return true
				}
			default:
				if path == prefix || strings.HasPrefix(path, prefix+"/") {
					return true
				}
			}
		}
	}
	return false
}

// rootRelative finds the root-relative links and assets of a page.
var rootRelative = regexp.MustCompile(`(?:href|src|action)="(/[^"]*)"`)

// TestHelmChartIngressRoutesThePortal renders the Ingress with its default
// paths and checks them against a live `outboxd serve`: a tenant portal
// link the API signs, the portal page it opens and every root-relative
// link and asset of that page are routed to the Service, while the API
// and the operators' console are not. className, annotations and tls
// reach the Ingress.
// Mutation: dropping /static from the default paths (the portal's
// stylesheet unrouted) or the Ingress's backend port, or adding / to
// them, makes this fail.
func TestHelmChartIngressRoutesThePortal(t *testing.T) {
	t.Parallel()
	r := renderChart(t, "--set", "ingress.enabled=true,ingress.className=nginx,ingress.tls[0].secretName=outboxd-tls,ingress.tls[0].hosts[0]=outboxd.example.com",
		"--set", "ingress.annotations.cert-manager\\.io/cluster-issuer=letsencrypt")
	ing := r.ingress
	if ing == nil {
		t.Fatal("ingress.enabled rendered no Ingress")
	}
	if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "nginx" || len(ing.Spec.TLS) != 1 ||
		ing.Spec.TLS[0].SecretName != "outboxd-tls" || ing.Annotations["cert-manager.io/cluster-issuer"] != "letsencrypt" {
		t.Errorf("className, tls or annotations did not reach the Ingress: %+v %v", ing.Spec, ing.Annotations)
	}
	for _, closed := range []string{"/", "/v1/messages", "/signin", "/metrics", "/portalx"} {
		if ingressRoutes(ing, r.service, closed) {
			t.Errorf("the default Ingress routes %s: it should expose the portal only", closed)
		}
	}

	// A live serve: the link the API signs and what it opens.
	key, err := destinations.NewKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	srv := serveLogSink(t, destinations.EnvSecretsKey+"="+key)
	resp, err := http.Post("http://"+srv.Addr()+"/v1/tenants/acme/portal", "application/json", strings.NewReader(`{"expires_in": "1h"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var link struct{ URL string }
	if err := json.NewDecoder(resp.Body).Decode(&link); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/tenants/acme/portal: %s %v", resp.Status, err)
	}
	u, err := url.Parse(link.URL)
	if err != nil || u.Path != portal.OpenPath {
		t.Fatalf("portal link %q: %v", link.URL, err)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Jar: jar}
	page, final := getPage(t, client, link.URL)
	if !strings.HasPrefix(final.Path, portal.Path+"/") {
		t.Fatalf("the link led to %s, not the portal", final)
	}
	paths := []string{u.Path, final.Path}
	for _, m := range rootRelative.FindAllStringSubmatch(page, -1) {
		p, err := url.Parse(m[1])
		if err != nil {
			t.Fatalf("link %q on the portal page: %v", m[1], err)
		}
		paths = append(paths, p.Path)
	}
	if len(paths) < 4 {
		t.Fatalf("the portal page links %v only", paths)
	}
	for _, p := range paths {
		if !ingressRoutes(ing, r.service, p) {
			t.Errorf("the portal uses %s, which the default Ingress does not route", p)
		}
	}
}

// getPage GETs target with client and returns the body and the URL it
// ended at, failing the test on any status but 200.
func getPage(t *testing.T, client *http.Client, target string) (string, *url.URL) {
	t.Helper()
	resp, err := client.Get(target)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", target, resp.Status, err, body)
	}
	return string(body), resp.Request.URL
}

// TestHelmChartTunesAlerts: prometheusRule.rules replaces an alert's
// threshold, for and severity and drops a disabled alert, leaving every
// other rule as alerts.yaml has it; the tuned expressions still parse as
// PromQL. A threshold for an alert that compares with no number is
// refused, naming it.
// Mutation: a template that ignores enabled, replaces the threshold
// anywhere but at the expression's end, or skips the check for alerts
// without a threshold, makes this fail.
func TestHelmChartTunesAlerts(t *testing.T) {
	t.Parallel()
	r := renderChart(t, "--set", "prometheusRule.enabled=true",
		"--set", "prometheusRule.rules.OutboxdDeliveryFailureRatio.threshold=0.5,prometheusRule.rules.OutboxdDeliveryFailureRatio.for=20m",
		"--set", "prometheusRule.rules.OutboxdDeadLetters.severity=critical",
		"--set", "prometheusRule.rules.OutboxdSinkPausedByHand.enabled=false",
		"--set", "prometheusRule.rules.OutboxdConfigReloadFailed.enabled=true")
	want := alertsAsRuleSpec(t)
	got := map[string]monitoringv1.Rule{}
	for _, g := range r.rule.Spec.Groups {
		for _, rule := range g.Rules {
			got[rule.Alert] = rule
			metricNames(t, rule.Expr.String())
		}
	}
	for _, g := range want.Groups {
		for _, rule := range g.Rules {
			tuned, ok := got[rule.Alert]
			switch rule.Alert {
			case "OutboxdSinkPausedByHand":
				if ok {
					t.Errorf("%s is rendered though disabled", rule.Alert)
				}
				continue
			case "OutboxdDeliveryFailureRatio":
				if !strings.HasSuffix(strings.TrimSpace(tuned.Expr.String()), "> 0.5") || tuned.For == nil || *tuned.For != "20m" {
					t.Errorf("%s: expr %q for %v, want threshold 0.5 for 20m", rule.Alert, tuned.Expr.String(), tuned.For)
				}
				rule.Expr, rule.For = tuned.Expr, tuned.For
			case "OutboxdDeadLetters":
				if tuned.Labels["severity"] != "critical" {
					t.Errorf("%s: severity %q, want critical", rule.Alert, tuned.Labels["severity"])
				}
				rule.Labels = tuned.Labels
			}
			if !reflect.DeepEqual(tuned, rule) {
				t.Errorf("%s changed though not tuned (or tuned beyond its value):\n got %+v\nwant %+v", rule.Alert, tuned, rule)
			}
		}
	}
	_, err := helm(t, "template", release, chartDir, "--set", "prometheusRule.enabled=true,prometheusRule.rules.OutboxdNoRelayUp.threshold=1")
	if err == nil || !strings.Contains(err.Error(), "OutboxdNoRelayUp.threshold") {
		t.Errorf("a threshold for OutboxdNoRelayUp: %v, want an error naming it", err)
	}
}
