package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/toolpdp/toolpdp/internal/testkit"
	"go.yaml.in/yaml/v3"
)

const manifestDir = "../../deploy/kubernetes/base"

type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		PolicyTypes []string `yaml:"policyTypes"`
		Ingress     []struct {
			Ports []struct {
				Port any `yaml:"port"`
			} `yaml:"ports"`
		} `yaml:"ingress"`
		Template struct {
			Metadata struct {
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	SecurityContext struct {
		RunAsNonRoot   bool              `yaml:"runAsNonRoot"`
		FSGroup        int               `yaml:"fsGroup"`
		SeccompProfile map[string]string `yaml:"seccompProfile"`
	} `yaml:"securityContext"`
	InitContainers []container `yaml:"initContainers"`
	Containers     []container `yaml:"containers"`
	Volumes        []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name  string `yaml:"name"`
			Items []struct {
				Key  string `yaml:"key"`
				Path string `yaml:"path"`
			} `yaml:"items"`
		} `yaml:"configMap"`
		EmptyDir any `yaml:"emptyDir"`
	} `yaml:"volumes"`
}

type probe struct {
	GRPC *struct {
		Port int `yaml:"port"`
	} `yaml:"grpc"`
}

type container struct {
	Name          string   `yaml:"name"`
	Image         string   `yaml:"image"`
	Args          []string `yaml:"args"`
	RestartPolicy string   `yaml:"restartPolicy"`
	Env           []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	StartupProbe   *probe `yaml:"startupProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

func (c container) mount(volume string) string {
	for _, m := range c.VolumeMounts {
		if m.Name == volume {
			return m.MountPath
		}
	}
	return ""
}

// TestKubernetesManifests: every manifest parses, and what the sidecar is
// told matches what the pod gives it: the socket path, the probe port, the
// bundle mount, and a bundle that passes `toolpdp check`.
func TestKubernetesManifests(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(manifestDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kust struct {
		Resources []string `yaml:"resources"`
	}
	if err := yaml.Unmarshal(raw, &kust); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	objects := map[string]k8sObject{}
	for _, r := range kust.Resources {
		raw, err := os.ReadFile(filepath.Join(manifestDir, r))
		if err != nil {
			t.Fatalf("kustomization lists %s: %v", r, err)
		}
		var o k8sObject
		if err := yaml.Unmarshal(raw, &o); err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		objects[o.Kind] = o
	}
	pod := objects["Deployment"].Spec.Template.Spec
	var sidecar, installer container
	for _, c := range pod.InitContainers {
		switch {
		case c.Name == "toolpdp" && c.RestartPolicy == "Always":
			sidecar = c
		case c.Name == "toolpdp-exec" && c.RestartPolicy == "":
			installer = c
		default:
			t.Errorf("init container %s (restartPolicy %q): want only the toolpdp sidecar and the toolpdp-exec installer", c.Name, c.RestartPolicy)
		}
	}
	if sidecar.Name == "" {
		t.Fatal("toolpdp must be the native sidecar (an init container with restartPolicy Always)")
	}
	agent := pod.Containers[0]
	checkExecInstaller(t, installer, agent, sidecar)
	var approver container
	for _, c := range pod.Containers {
		if c.Name == "approver" {
			approver = c
		}
	}

	// The sidecar's args and TOOLPDP_* variables are valid flags of this
	// very binary, read as serve reads them; no variable names a flag that
	// does not exist.
	for _, e := range sidecar.Env {
		t.Setenv(e.Name, e.Value)
	}
	cfg, parseArgs := serveFlags(io.Discard)
	if len(sidecar.Args) == 0 || sidecar.Args[0] != "serve" {
		t.Fatalf("sidecar args %v do not start with serve", sidecar.Args)
	}
	if err := parseArgs(sidecar.Args[1:]); err != nil {
		t.Fatalf("sidecar args and env: %v", err)
	}
	known := map[string]bool{}
	serveFlagSetOf().VisitAll(func(f *flag.Flag) { known[EnvName(f.Name)] = true })
	for _, e := range sidecar.Env {
		if strings.HasPrefix(e.Name, "TOOLPDP_") && !known[e.Name] {
			t.Errorf("sidecar env %s names no serve flag", e.Name)
		}
	}

	// Images are pinned: a sidecar changes with a deliberate bump.
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		if i := strings.LastIndex(c.Image, ":"); i < 0 || strings.Contains(c.Image[i:], "/") || c.Image[i+1:] == "latest" {
			t.Errorf("container %s: image %q is not pinned to a tag", c.Name, c.Image)
		}
	}

	// Socket: the --listen path lies in the shared volume, mounted in both
	// containers at the same place, and the agent is told that address.
	if len(cfg.Listen) != 1 || !strings.HasPrefix(cfg.Listen[0], "unix://") {
		t.Fatalf("--listen %v: want one unix socket", cfg.Listen)
	}
	sock := strings.TrimPrefix(cfg.Listen[0], "unix://")
	if filepath.Dir(sock) != sidecar.mount("toolpdp-socket") || sidecar.mount("toolpdp-socket") != agent.mount("toolpdp-socket") {
		t.Fatalf("socket %s: mounted at %q (sidecar) and %q (agent)", sock, sidecar.mount("toolpdp-socket"), agent.mount("toolpdp-socket"))
	}
	agentAddr := ""
	for _, e := range agent.Env {
		if e.Name == "TOOLPDP_ADDR" {
			agentAddr = e.Value
		}
	}
	if agentAddr != cfg.Listen[0] {
		t.Fatalf("agent TOOLPDP_ADDR %q, sidecar --listen %q", agentAddr, cfg.Listen[0])
	}
	if cfg.SocketMode != 0o660 || pod.SecurityContext.FSGroup == 0 {
		t.Fatalf("socket mode %o with fsGroup %d: the agent reaches a 0660 socket through the pod's group", cfg.SocketMode, pod.SecurityContext.FSGroup)
	}

	// The approver's socket (--confirm-listen) lies in a volume mounted into
	// the sidecar and the approver, and into no container that runs tools.
	if len(cfg.ConfirmListen) != 1 || !strings.HasPrefix(cfg.ConfirmListen[0], "unix://") {
		t.Fatalf("--confirm-listen %v: want one unix socket (loopback TCP is shared by every container of the pod)", cfg.ConfirmListen)
	}
	approverSock := strings.TrimPrefix(cfg.ConfirmListen[0], "unix://")
	dir := filepath.Dir(approverSock)
	if sidecar.mount("toolpdp-approver-socket") != dir || approver.mount("toolpdp-approver-socket") != dir {
		t.Fatalf("approver socket %s: mounted at %q (sidecar) and %q (approver)", approverSock, sidecar.mount("toolpdp-approver-socket"), approver.mount("toolpdp-approver-socket"))
	}
	for _, c := range pod.Containers {
		for _, m := range c.VolumeMounts {
			if c.Name != "approver" && (m.Name == "toolpdp-approver-socket" || dir == m.MountPath || strings.HasPrefix(dir, m.MountPath+"/") || strings.HasPrefix(m.MountPath, dir+"/")) {
				t.Errorf("container %s mounts %s at %s: only the approver may reach the approver's socket", c.Name, m.Name, m.MountPath)
			}
		}
	}
	if filepath.Dir(sock) == dir {
		t.Fatal("the agent's and the approver's sockets share a directory")
	}

	// Probes: gRPC health on the --health-listen port, declared as a port.
	_, port, err := net.SplitHostPort(cfg.HealthListen)
	if err != nil {
		t.Fatalf("--health-listen %q: %v", cfg.HealthListen, err)
	}
	for name, p := range map[string]*probe{"startup": sidecar.StartupProbe, "readiness": sidecar.ReadinessProbe, "liveness": sidecar.LivenessProbe} {
		if p == nil || p.GRPC == nil || strconv.Itoa(p.GRPC.Port) != port {
			t.Errorf("%s probe: want grpc on port %s", name, port)
		}
	}

	// Bundle: --bundle is the ConfigMap volume's mount; the ConfigMap exists
	// and what it holds is a valid bundle.
	if cfg.Engine.Bundles[0] != sidecar.mount("toolpdp-bundle") {
		t.Fatalf("--bundle %s, bundle volume mounted at %s", cfg.Engine.Bundles[0], sidecar.mount("toolpdp-bundle"))
	}
	cm := objects["ConfigMap"]
	files := map[string]string{}
	for _, v := range pod.Volumes {
		if v.Name != "toolpdp-bundle" || v.ConfigMap == nil || v.ConfigMap.Name != cm.Metadata.Name {
			continue
		}
		for _, item := range v.ConfigMap.Items {
			content, ok := cm.Data[item.Key]
			if !ok {
				t.Fatalf("volume item %s: no such key in ConfigMap %s", item.Key, cm.Metadata.Name)
			}
			files[item.Path] = content
		}
	}
	if files[".manifest"] == "" {
		t.Fatal("the bundle volume has no .manifest")
	}
	if out, _, err := runCmd(t, "", "check", testkit.WriteBundle(t, files)); err != nil {
		t.Fatalf("toolpdp check on the ConfigMap's bundle: %v", err)
	} else if strings.Contains(out, "warning") {
		t.Fatalf("the example bundle has warnings:\n%s", out)
	}

	// Hardening and sizing.
	if !pod.SecurityContext.RunAsNonRoot || pod.SecurityContext.SeccompProfile["type"] != "RuntimeDefault" {
		t.Error("pod: want runAsNonRoot and seccomp RuntimeDefault")
	}
	for _, c := range []container{sidecar, agent, approver} {
		sc := c.SecurityContext
		if !sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("%s: want a read-only root, no privilege escalation, all capabilities dropped", c.Name)
		}
	}
	if sidecar.Resources.Requests["memory"] == "" || sidecar.Resources.Limits["memory"] == "" || sidecar.Resources.Requests["cpu"] == "" {
		t.Error("sidecar: want cpu and memory requests and a memory limit")
	}
	np := objects["NetworkPolicy"]
	// Ingress is denied but for the metrics port, and only when scraped.
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != "Ingress" {
		t.Error("NetworkPolicy: want policyTypes [Ingress]")
	}
	var open []string
	for _, rule := range np.Spec.Ingress {
		if len(rule.Ports) == 0 {
			t.Error("NetworkPolicy: an ingress rule without ports opens every port")
		}
		for _, p := range rule.Ports {
			open = append(open, fmt.Sprint(p.Port))
		}
	}
	_, metricsPort, _ := net.SplitHostPort(cfg.MetricsListen)
	annotations := objects["Deployment"].Spec.Template.Metadata.Annotations
	want := []string{}
	if annotations["prometheus.io/scrape"] == "true" {
		if annotations["prometheus.io/port"] != metricsPort {
			t.Errorf("scrape port %q, --metrics-listen %q", annotations["prometheus.io/port"], cfg.MetricsListen)
		}
		want = []string{metricsPort}
	}
	if strings.Join(open, ",") != strings.Join(want, ",") {
		t.Errorf("NetworkPolicy opens ports %v, want %v (the scraped metrics port, or none)", open, want)
	}
	approverAddr := ""
	for _, e := range approver.Env {
		if e.Name == "TOOLPDP_ADDR" {
			approverAddr = e.Value
		}
	}
	if approverAddr != cfg.ConfirmListen[0] {
		t.Errorf("approver TOOLPDP_ADDR %q, sidecar --confirm-listen %q", approverAddr, cfg.ConfirmListen[0])
	}
}

func serveFlagSetOf() *flag.FlagSet {
	_, fs := serveFlagSet(io.Discard)
	return fs
}

// checkExecInstaller: the installer copies the sidecar's own binary (the
// same image) into a volume the agent mounts read-only, with this very
// binary's exec --install-to, and the agent is told where it is.
func checkExecInstaller(t *testing.T, installer, agent, sidecar container) {
	t.Helper()
	if installer.Name == "" {
		t.Fatal("no toolpdp-exec init container hands the agent the toolpdp binary")
	}
	if installer.Image != sidecar.Image {
		t.Errorf("installer image %q, sidecar %q: exec and serve of one version", installer.Image, sidecar.Image)
	}
	if len(installer.Args) != 3 || installer.Args[0] != "exec" || installer.Args[1] != "--install-to" {
		t.Fatalf("installer args %q: want exec --install-to DIR", installer.Args)
	}
	dir := installer.Args[2]
	if installer.mount("toolpdp-bin") != dir || agent.mount("toolpdp-bin") != dir {
		t.Errorf("toolpdp-bin mounted at %q (installer) and %q (agent), want %s", installer.mount("toolpdp-bin"), agent.mount("toolpdp-bin"), dir)
	}
	for _, m := range agent.VolumeMounts {
		if m.Name == "toolpdp-bin" && !m.ReadOnly {
			t.Error("the agent mounts toolpdp-bin writable: a command could replace the binary that confines it")
		}
	}
	var execEnv string
	for _, e := range agent.Env {
		if e.Name == "TOOLPDP_EXEC" {
			execEnv = e.Value
		}
	}
	if execEnv != filepath.Join(dir, "toolpdp") {
		t.Errorf("agent TOOLPDP_EXEC %q, want %s", execEnv, filepath.Join(dir, "toolpdp"))
	}
	// The args work with this binary: it installs itself there.
	out := t.TempDir()
	if err := run(context.Background(), []string{"exec", "--install-to", out}, nil, io.Discard, io.Discard); err != nil {
		t.Fatalf("exec --install-to: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(out, "toolpdp")); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("exec --install-to left no executable toolpdp: %v", err)
	}
}
