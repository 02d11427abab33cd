package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/tollgate/tollgate/cmd/internal/config"
)

// The deploy/ files are checked against the gateway they deploy: the Kubernetes manifest is
// decoded with the API's own types (an unknown or misspelt field is an error, as a strict
// kubectl apply makes it), its probes, preStop and grace period held to the drain timings;
// the systemd unit is verified by systemd-analyze where it is installed, and its stop timeout
// held to the same timings.

const deployDir = "../../deploy"

// manifests is a decoded deploy/kubernetes.yaml.
type manifests struct {
	configMaps  []*corev1.ConfigMap
	deployments []*appsv1.Deployment
	services    []*corev1.Service
}

// decodeManifests decodes a multi-document YAML of ConfigMaps, Deployments and Services,
// refusing unknown fields and other kinds.
func decodeManifests(data []byte) (*manifests, error) {
	m := &manifests{}
	for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		var head struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		var obj any
		switch head.APIVersion + " " + head.Kind {
		case "v1 ConfigMap":
			c := &corev1.ConfigMap{}
			m.configMaps, obj = append(m.configMaps, c), c
		case "apps/v1 Deployment":
			d := &appsv1.Deployment{}
			m.deployments, obj = append(m.deployments, d), d
		case "v1 Service":
			s := &corev1.Service{}
			m.services, obj = append(m.services, s), s
		default:
			return nil, fmt.Errorf("document %d: unexpected %q %q", i, head.APIVersion, head.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i, head.Kind, err)
		}
	}
	return m, nil
}

// readManifests decodes deploy/kubernetes.yaml: one of each kind.
func readManifests(t *testing.T) (*corev1.ConfigMap, *appsv1.Deployment, *corev1.Service) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(deployDir, "kubernetes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeManifests(data)
	if err != nil {
		t.Fatalf("deploy/kubernetes.yaml: %v", err)
	}
	if len(m.configMaps) != 1 || len(m.deployments) != 1 || len(m.services) != 1 {
		t.Fatalf("deploy/kubernetes.yaml: %d ConfigMaps, %d Deployments, %d Services; want one each",
			len(m.configMaps), len(m.deployments), len(m.services))
	}
	return m.configMaps[0], m.deployments[0], m.services[0]
}

// TestManifestDecoderRefusesUnknownFields: the decoder the manifest test relies on refuses
// what the API server would not take, so a misspelt field cannot pass as checked.
func TestManifestDecoderRefusesUnknownFields(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(deployDir, "kubernetes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, old, new string }{
		{"a misspelt probe field", "periodSeconds: 2", "periodSecond: 2"},
		{"an unknown container field", "          ports:\n", "          portz:\n"},
		{"a field at the wrong level", "      terminationGracePeriodSeconds: 50", "  terminationGracePeriodSeconds: 50"},
		{"a wrong type", "replicas: 1", "replicas: one"},
		{"an unknown kind", "kind: Service", "kind: Ingress"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			changed := strings.Replace(string(data), c.old, c.new, 1)
			if changed == string(data) {
				t.Fatalf("%q is not in the manifest", c.old)
			}
			if _, err := decodeManifests([]byte(changed)); err == nil {
				t.Errorf("decoded without error")
			}
		})
	}
}

// drainTimings reads drain_delay and drain_grace as the gateway takes them from cfgYAML,
// defaults included.
func drainTimings(t *testing.T, cfgYAML string, env func(string) (string, bool)) (delay, grace time.Duration) {
	t.Helper()
	cfg, err := config.Parse("deploy config", []byte(cfgYAML), env)
	if err != nil {
		t.Fatalf("the deployed configuration: %v", err)
	}
	return cfg.DrainDelay.D(), cfg.DrainGrace.D()
}

// checkStoreWritable: a configuration with client keys needs a store (docs/tenants.md), and
// the container's root filesystem is read-only, so the configuration must name a SQLite file
// on a writable volume (or PostgreSQL).
func checkStoreWritable(t *testing.T, cfgYAML string, c corev1.Container, pod corev1.PodSpec) {
	t.Helper()
	cfg, err := config.Parse("deploy config", []byte(cfgYAML), func(k string) (string, bool) { return "value-of-" + k, true })
	if err != nil {
		t.Fatalf("the deployed configuration: %v", err)
	}
	if len(cfg.Auth.APIKeys) == 0 {
		return
	}
	switch {
	case cfg.Store == nil:
		t.Fatal("client keys and no store: the default under $HOME is not writable on a read-only root filesystem")
	case cfg.Store.Postgres != "":
		return
	}
	for _, vm := range c.VolumeMounts {
		if vm.ReadOnly || filepath.Dir(cfg.Store.SQLite) != vm.MountPath {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == vm.Name && (v.EmptyDir != nil || v.PersistentVolumeClaim != nil) {
				return
			}
		}
	}
	t.Errorf("store sqlite %s is not on a writable volume mounted at its directory", cfg.Store.SQLite)
}

func TestKubernetesManifest(t *testing.T) {
	cm, dep, svc := readManifests(t)
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	img := readContainerfile(t)

	// The configuration parses with exactly the variables the container is given.
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = "value-of-" + e.Name
	}
	delay, grace := drainTimings(t, cm.Data["tollgate.yaml"], func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	checkStoreWritable(t, cm.Data["tollgate.yaml"], c, pod)

	// It is read from where the ConfigMap is mounted.
	i := slices.Index(c.Args, "--config")
	if i < 0 || i+1 >= len(c.Args) {
		t.Fatalf("args %q: no --config", c.Args)
	}
	mounted := false
	for _, vm := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil && v.ConfigMap.Name == cm.Name &&
				filepath.Join(vm.MountPath, "tollgate.yaml") == c.Args[i+1] {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("--config %s is not the ConfigMap %s's tollgate.yaml as mounted", c.Args[i+1], cm.Name)
	}

	// The probes reach the port the image listens on, on the routes that say so.
	var port corev1.ContainerPort
	for _, p := range c.Ports {
		if p.Name == "http" {
			port = p
		}
	}
	if strconv.Itoa(int(port.ContainerPort)) != img.listenPort {
		t.Errorf("container port http is %d, the image listens on %s", port.ContainerPort, img.listenPort)
	}
	for _, p := range []struct {
		what  string
		probe *corev1.Probe
		path  string
	}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("no %s probe over HTTP", p.what)
			continue
		}
		if g := p.probe.HTTPGet; g.Path != p.path || g.Port.String() != port.Name {
			t.Errorf("%s probe GET %s on port %s, want %s on %s", p.what, g.Path, g.Port.String(), p.path, port.Name)
		}
	}

	// A terminating pod serves through its removal from the endpoints (preStop, then
	// drain_delay with /readyz 503), then drains; the kubelet waits for all of it.
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Fatal("no preStop sleep (the image has no shell or sleep binary for an exec hook)")
	}
	preStop := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	if preStop < delay {
		t.Errorf("preStop sleeps %s, less than drain_delay %s", preStop, delay)
	}
	need := preStop + delay + grace + finalWrite
	var period time.Duration // the kubelet's default is 30s
	if pod.TerminationGracePeriodSeconds != nil {
		period = time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	}
	if period < need {
		t.Errorf("terminationGracePeriodSeconds %s, want at least %s (preStop %s + drain_delay %s + drain_grace %s + final writes %s)",
			period, need, preStop, delay, grace, finalWrite)
	}

	// It runs as the image's user, not root.
	sc := pod.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || strconv.FormatInt(*sc.RunAsUser, 10) != img.uid {
		t.Errorf("pod security context %+v: want runAsNonRoot and the image's user %s", sc, img.uid)
	}

	// The Service selects these pods and sends to the named port.
	for k, v := range svc.Spec.Selector {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("service selector %s=%s does not select the pods (labels %v)", k, v, dep.Spec.Template.Labels)
		}
	}
	if len(svc.Spec.Selector) == 0 || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != port.Name {
		t.Errorf("service %+v: want a selector and one port to %s", svc.Spec, port.Name)
	}
}

// unit is a systemd unit file: section → key → values, in order.
type unit map[string]map[string][]string

func parseUnit(t *testing.T, data []byte) unit {
	t.Helper()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("line %d: %q is neither a section nor key=value", n, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

func TestSystemdUnit(t *testing.T) {
	path := filepath.Join(deployDir, "tollgate.service")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := parseUnit(t, data)
	svc := u["Service"]
	exec0 := strings.Fields(strings.Join(svc["ExecStart"], ""))
	if len(exec0) < 3 || exec0[1] != "--config" {
		t.Fatalf("ExecStart %q: want the binary and --config FILE", svc["ExecStart"])
	}
	if got := svc["ExecReload"]; len(got) != 1 || !strings.Contains(got[0], "-HUP $MAINPID") {
		t.Errorf("ExecReload %q: want SIGHUP to the gateway (it reloads)", got)
	}
	if got := svc["KillSignal"]; len(got) != 1 || got[0] != "SIGTERM" {
		t.Errorf("KillSignal %q: want SIGTERM (it drains)", got)
	}
	// The stop timeout covers the default drain (a configuration may lengthen it).
	delay, grace := drainTimings(t, "providers: [{name: demo, kind: fake, models: [{id: echo}]}]", func(string) (string, bool) { return "", false })
	stop, err := time.ParseDuration(strings.Join(svc["TimeoutStopSec"], ""))
	if need := delay + grace + finalWrite; err != nil || stop < need {
		t.Errorf("TimeoutStopSec %q (%v): want at least %s (drain_delay %s + drain_grace %s + final writes %s)", svc["TimeoutStopSec"], err, need, delay, grace, finalWrite)
	}
	// The default store lives in $XDG_STATE_HOME/tollgate: the one writable directory.
	if got := svc["StateDirectory"]; len(got) != 1 || got[0] != "tollgate" || !slices.Contains(svc["Environment"], "XDG_STATE_HOME=/var/lib") {
		t.Errorf("StateDirectory %q, Environment %q: want tollgate and XDG_STATE_HOME=/var/lib, so the default store is writable", got, svc["Environment"])
	}
	if got := svc["DynamicUser"]; len(got) != 1 || got[0] != "yes" {
		t.Errorf("DynamicUser %q: want yes (never root)", got)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("no systemd-analyze: the unit was parsed, not verified")
		return
	}
	// systemd-analyze verify wants ExecStart's binary to exist: the one these tests build.
	verified := filepath.Join(t.TempDir(), "tollgate.service")
	text := strings.Replace(string(data), "ExecStart="+exec0[0], "ExecStart="+tollgateBinary(t, ""), 1)
	if err := os.WriteFile(verified, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", verified).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// containerfile is what the tests read of the Containerfile.
type containerfile struct {
	uid, gid   string   // USER
	entrypoint []string // ENTRYPOINT, exec form
	listenPort string   // the port of its --listen
}

func readContainerfile(t *testing.T) containerfile {
	t.Helper()
	data, err := os.ReadFile("../../Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	var c containerfile
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "USER "); ok {
			c.uid, c.gid, _ = strings.Cut(strings.TrimSpace(v), ":")
		}
		if v, ok := strings.CutPrefix(line, "ENTRYPOINT "); ok {
			if err := json.Unmarshal([]byte(v), &c.entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s: not the exec form: %v", v, err)
			}
		}
	}
	if i := slices.Index(c.entrypoint, "--listen"); i >= 0 && i+1 < len(c.entrypoint) {
		_, c.listenPort, _ = strings.Cut(c.entrypoint[i+1], ":")
	}
	if _, err := strconv.Atoi(c.uid); err != nil || c.uid == "0" || c.listenPort == "" {
		t.Fatalf("Containerfile: USER %q (want a numeric non-root user), ENTRYPOINT %q (want --listen host:port)", c.uid, c.entrypoint)
	}
	return c
}
