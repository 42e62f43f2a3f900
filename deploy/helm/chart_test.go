// Package helm holds the tests of the toolpdp Helm chart: it is rendered
// with helm (pinned, installed with go install when missing) under several
// value sets, and every object is parsed strictly into the Kubernetes API
// types (an unknown field fails), the ServiceMonitor into the
// prometheus-operator's.
package helm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// helmVersion is the helm the chart is tested and linted with.
const helmVersion = "v3.22.0"

const (
	chartDir   = "toolpdp"
	centralDir = "../kubernetes/central"
)

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helmBinary finds helm: $TOOLPDP_HELM, else the pinned version in the
// tools cache, installed there with go install when missing.
func helmBinary(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		if p := os.Getenv("TOOLPDP_HELM"); p != "" {
			helmPath = p
			return
		}
		cache, err := os.UserCacheDir()
		if err != nil {
			helmErr = err
			return
		}
		// A directory per version: a helm built by go install does not know
		// its own version.
		bin := filepath.Join(cache, "toolpdp-tools", "helm-"+helmVersion)
		if _, err := os.Stat(filepath.Join(bin, "helm")); err == nil {
			helmPath = filepath.Join(bin, "helm")
			return
		}
		cmd := exec.Command("go", "install", "helm.sh/helm/v3/cmd/helm@"+helmVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+bin)
		if out, err := cmd.CombinedOutput(); err != nil {
			helmErr = fmt.Errorf("go install helm %s: %v\n%s", helmVersion, err, out)
			return
		}
		helmPath = filepath.Join(bin, "helm")
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return helmPath
}

// object is one rendered manifest, decoded into its API type.
type object struct {
	kind, name string
	value      any
	raw        map[string]any
}

func newTyped(kind string) (any, error) {
	switch kind {
	case "Deployment":
		return &appsv1.Deployment{}, nil
	case "StatefulSet":
		return &appsv1.StatefulSet{}, nil
	case "Service":
		return &corev1.Service{}, nil
	case "ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "NetworkPolicy":
		return &networkingv1.NetworkPolicy{}, nil
	case "ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}, nil
	}
	return nil, fmt.Errorf("kind %q is not one the chart should render", kind)
}

// parse splits a multi-document YAML stream and decodes every document
// strictly into its type.
func parse(t *testing.T, stream []byte) []object {
	t.Helper()
	var objs []object
	for _, doc := range regexpSplitDocs(stream) {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatalf("not YAML: %v\n%s", err, doc)
		}
		if head.Kind == "" {
			continue
		}
		typed, err := newTyped(head.Kind)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(doc, typed); err != nil {
			t.Fatalf("%s %s does not parse strictly as its API type: %v", head.Kind, head.Metadata.Name, err)
		}
		var raw map[string]any
		if err := yaml.Unmarshal(doc, &raw); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, object{kind: head.Kind, name: head.Metadata.Name, value: typed, raw: raw})
	}
	return objs
}

func regexpSplitDocs(stream []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(append([]byte("\n"), stream...), []byte("\n---")) {
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

func render(t *testing.T, args ...string) ([]object, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), append([]string{"template", "toolpdp", chartDir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return parse(t, out), nil
}

func mustRender(t *testing.T, args ...string) []object {
	t.Helper()
	objs, err := render(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func find[T any](t *testing.T, objs []object, kind string) T {
	t.Helper()
	for _, o := range objs {
		if o.kind == kind {
			return o.value.(T)
		}
	}
	t.Fatalf("no %s rendered (have %v)", kind, kinds(objs))
	var zero T
	return zero
}

func kinds(objs []object) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.kind+"/"+o.name)
	}
	return ks
}

func envOf(c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	return env
}

func TestHelmLint(t *testing.T) {
	out, err := exec.Command(helmBinary(t), "lint", "--strict", chartDir).CombinedOutput()
	if err != nil {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
}

// The default with a state URL and the ServiceMonitor on has every object a
// central decision point needs, and the container gets --state from state.url.
func TestChartDefaultHasEveryObject(t *testing.T) {
	objs := mustRender(t, "--set", "state.url=redis://redis.state:6379/0", "--set", "serviceMonitor.enabled=true")
	d := find[*appsv1.Deployment](t, objs, "Deployment")
	find[*corev1.Service](t, objs, "Service")
	pdb := find[*policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget")
	find[*networkingv1.NetworkPolicy](t, objs, "NetworkPolicy")
	sm := find[*monitoringv1.ServiceMonitor](t, objs, "ServiceMonitor")
	for _, o := range objs {
		if o.kind == "StatefulSet" {
			t.Errorf("state.url is set, yet the chart's own Redis was rendered")
		}
	}

	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Error("the pod does not run as non-root")
	}
	c := pod.Containers[0]
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("the root file system is not read-only")
	}
	if c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
		t.Error("privilege escalation is allowed")
	}
	if c.Resources.Limits.Memory().String() != "256Mi" || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("resources = %v", c.Resources)
	}
	env := envOf(c)
	want := map[string]string{
		"TOOLPDP_STATE":               "redis://redis.state:6379/0",
		"GOMEMLIMIT":                  "158MiB",
		"TOOLPDP_LISTEN":              ":8787",
		"TOOLPDP_CONFIRM_LISTEN":      ":8790",
		"TOOLPDP_CONSOLE_LISTEN":      ":8791",
		"TOOLPDP_APPROVER_TOKEN_FILE": "/etc/toolpdp/approver-tokens/0/approver",
		"TOOLPDP_WORKSPACE_TOKEN":     "default=/etc/toolpdp/workspace-tokens/0/default",
		"TOOLPDP_BUNDLE":              "/etc/toolpdp/bundle",
		"TOOLPDP_HEALTH_LISTEN":       ":8789",
		"TOOLPDP_METRICS_LISTEN":      ":8788",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
		if p == nil || p.GRPC == nil || p.GRPC.Port != 8789 {
			t.Errorf("%s probe is not gRPC on the health port: %+v", name, p)
		}
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget minAvailable = %v", pdb.Spec.MinAvailable)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" {
		t.Errorf("ServiceMonitor endpoints = %+v", sm.Spec.Endpoints)
	}
	svc := find[*corev1.Service](t, objs, "Service")
	ports := map[string]int32{}
	for _, p := range svc.Spec.Ports {
		ports[p.Name] = p.Port
	}
	if ports["grpc"] != 8787 || ports["approver"] != 8790 || ports["console"] != 8791 || ports["metrics"] != 8788 {
		t.Errorf("Service ports = %v: the approver and the console need ports of their own", ports)
	}
}

// Each value set renders objects that parse strictly, and says what it should.
func TestChartValueSets(t *testing.T) {
	t.Run("bundle server with a token from a Secret", func(t *testing.T) {
		objs := mustRender(t, "--set", "bundle.configMap.name=", "--set", "bundle.url=https://bundles.example/toolpdp.tar.gz",
			"--set", "bundle.tokenSecret.name=bundle-creds")
		c := find[*appsv1.Deployment](t, objs, "Deployment").Spec.Template.Spec.Containers[0]
		env := envOf(c)
		if env["TOOLPDP_BUNDLE"] != "https://bundles.example/toolpdp.tar.gz" || env["TOOLPDP_BUNDLE_TOKEN_FILE"] != "/etc/toolpdp/bundle-token/token" {
			t.Errorf("env = %v", env)
		}
	})
	t.Run("the chart's own Redis when state.url is empty", func(t *testing.T) {
		objs := mustRender(t)
		find[*appsv1.StatefulSet](t, objs, "StatefulSet")
		cm := find[*corev1.ConfigMap](t, objs, "ConfigMap")
		if !strings.Contains(cm.Data["redis.conf"], "maxmemory-policy noeviction") {
			t.Errorf("the chart's Redis could evict keys: %q", cm.Data["redis.conf"])
		}
		env := envOf(find[*appsv1.Deployment](t, objs, "Deployment").Spec.Template.Spec.Containers[0])
		if env["TOOLPDP_STATE"] != "redis://toolpdp-redis:6379/0" {
			t.Errorf("TOOLPDP_STATE = %q", env["TOOLPDP_STATE"])
		}
	})
	t.Run("mTLS, a 1Gi limit, the console off, a state password", func(t *testing.T) {
		objs := mustRender(t, "--set", "tls.secretName=tls", "--set", "tls.clientCASecret=client-ca", "--set", "workspaceTokens=null",
			"--set", "resources.limits.memory=1Gi", "--set", "console.enabled=false",
			"--set", "state.url=rediss://redis:6380/0", "--set", "state.passwordSecret.name=redis-pw")
		c := find[*appsv1.Deployment](t, objs, "Deployment").Spec.Template.Spec.Containers[0]
		env := envOf(c)
		if env["GOMEMLIMIT"] != "634MiB" || env["TOOLPDP_TLS_CLIENT_CA"] != "/etc/toolpdp/client-ca/ca.crt" || env["TOOLPDP_STATE_PASSWORD_FILE"] != "/etc/toolpdp/state-password/password" {
			t.Errorf("env = %v", env)
		}
		if _, ok := env["TOOLPDP_CONSOLE_LISTEN"]; ok {
			t.Error("the console is served although console.enabled is false")
		}
		if _, ok := env["TOOLPDP_WORKSPACE_TOKEN"]; ok {
			t.Error("workspace tokens were configured although none were given")
		}
	})
	for name, args := range map[string][]string{
		"no caller credentials":         {"--set", "workspaceTokens=null"},
		"no approver token":             {"--set", "approver.tokens=null"},
		"a limit GOMEMLIMIT cannot use": {"--set", "resources.limits.memory=300M"},
		"no state store":                {"--set", "redis.enabled=false"},
		"two bundle sources":            {"--set", "bundle.url=https://x/b.tar.gz"},
	} {
		t.Run("refused: "+name, func(t *testing.T) {
			if _, err := render(t, args...); err == nil {
				t.Errorf("rendered, want a refusal")
			}
		})
	}
}

// deploy/kubernetes/central is the chart rendered with its defaults (by
// scripts/render-central): both give exactly the same objects.
func TestCentralManifestsAreTheChart(t *testing.T) {
	want := mustRender(t)
	var got []object
	entries, err := filepath.Glob(filepath.Join(centralDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range entries {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, parse(t, b)...)
	}
	index := func(objs []object) map[string]map[string]any {
		m := map[string]map[string]any{}
		for _, o := range objs {
			m[o.kind+"/"+o.name] = o.raw
		}
		return m
	}
	w, g := index(want), index(got)
	if len(w) != len(g) {
		t.Errorf("the chart renders %v, %s holds %v: run scripts/render-central", kinds(want), centralDir, kinds(got))
	}
	for k, v := range w {
		if !reflect.DeepEqual(v, g[k]) {
			a, _ := json.MarshalIndent(v, "", " ")
			b, _ := json.MarshalIndent(g[k], "", " ")
			t.Errorf("%s differs between the chart and %s (run scripts/render-central):\nchart: %s\ncentral: %s", k, centralDir, a, b)
		}
	}
}
