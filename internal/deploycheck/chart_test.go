// Package deploycheck_test checks what skipq ships in deploy/ to run it:
// the Helm chart in deploy/helm/skipq, the plain manifests rendered from it
// in deploy/kubernetes/, and deploy/compose.yaml. It lives under internal/
// so that nothing outside client/, wire and cmd/ looks importable. The chart goes through Helm's own lint and template (the
// Helm Go module go.mod pins, the one `go tool helm` runs), over its
// defaults and three variants; every object it renders is decoded strictly
// into the Kubernetes API types (an unknown or misplaced field fails) and
// held to the rules docs/DEPLOY.md promises.
package deploycheck_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "../../deploy/helm/skipq"

// The oldest Kubernetes the chart supports (Chart.yaml's kubeVersion:
// lifecycle.preStop.sleep).
const kubeVersion = "v1.30.0"

// Distinct secret values for the variants that make their Secret: none of
// them may appear in any object but a Secret.
const (
	dbPassword     = "pw-7c1d0b2e9f"
	sigv4Key       = "c2lndjQta2V5LTMyLWJ5dGVzLWZvci10aGUtdGVzdC0wMQ=="
	consoleSecret  = "console-secret-of-at-least-32-characters-5e1a"
	metricsToken   = "metrics-token-9b3f"
	databaseURL    = "postgres://skipq:" + dbPassword + "@db.internal:5432/skipq"
	tlsDatabaseURL = databaseURL + "?sslmode=verify-full&sslrootcert=/etc/skipq/database-ca/ca.crt"
)

var secretValues = []string{dbPassword, sigv4Key, consoleSecret, metricsToken}

func createdSecrets(url string) map[string]any {
	return map[string]any{"create": true, "databaseURL": url, "sigv4MasterKey": sigv4Key,
		"consoleSecret": consoleSecret, "metricsToken": metricsToken}
}

// variants are the value sets checked: the defaults and one per optional
// part the issue names.
var variants = map[string]map[string]any{
	"defaults": {},
	"pgbouncer": {
		"secrets":   createdSecrets(databaseURL),
		"pgbouncer": map[string]any{"enabled": true},
	},
	"tls": {
		"secrets":    createdSecrets(tlsDatabaseURL),
		"databaseCA": map[string]any{"secretName": "skipq-database-ca"},
		"ingress": map[string]any{"enabled": true, "className": "nginx", "host": "queues.example.com",
			"tlsSecretName": "queues-example-com-tls", "trustedProxies": "10.0.0.0/8"},
	},
	"kubemq": {
		"kubemq":         map[string]any{"enabled": true},
		"service":        map[string]any{"sqsPort": 9324},
		"serviceMonitor": map[string]any{"enabled": true},
	},
}

func TestChartLints(t *testing.T) {
	for name, values := range variants {
		t.Run(name, func(t *testing.T) {
			lint := action.NewLint()
			lint.Strict = true
			kv, err := chartutil.ParseKubeVersion(kubeVersion)
			if err != nil {
				t.Fatal(err)
			}
			lint.KubeVersion = kv
			result := lint.Run([]string{chartDir}, values)
			for _, m := range result.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				}
			}
			for _, err := range result.Errors {
				t.Errorf("helm lint: %v", err)
			}
		})
	}
}

func TestChartRendersWhatItPromises(t *testing.T) {
	for name, values := range variants {
		t.Run(name, func(t *testing.T) {
			objs := decode(t, render(t, values))
			checkNodes(t, objs, values)
			checkMigrationJob(t, objs)
			checkSecretsStayInSecrets(t, objs)
			switch name {
			case "pgbouncer":
				checkPgBouncer(t, objs)
			case "tls":
				checkTLS(t, objs)
			case "kubemq":
				checkKubeMQ(t, objs)
			}
		})
	}
}

func TestChartRefusesSecretsInTheConfigMap(t *testing.T) {
	for _, key := range []string{"SKIPQ_DATABASE_URL", "SKIPQ_SIGV4_MASTER_KEY", "SKIPQ_CONSOLE_SECRET", "SKIPQ_METRICS_TOKEN"} {
		_, err := renderErr(map[string]any{"config": map[string]any{key: "x"}})
		if err == nil || !strings.Contains(err.Error(), "is a secret") {
			t.Errorf("config.%s rendered (%v); want the chart to refuse it", key, err)
		}
	}
}

// render is `helm template skipq helm/skipq` with values.
func render(t *testing.T, values map[string]any) string {
	t.Helper()
	out, err := renderErr(values)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func renderErr(values map[string]any) (string, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return "", err
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.DryRun = true
	install.DryRunOption = "true"
	install.ClientOnly = true
	install.Replace = true
	install.ReleaseName = "skipq"
	install.Namespace = "skipq"
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return "", err
	}
	install.KubeVersion = kv
	rel, err := install.Run(ch, values)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	out.WriteString(strings.TrimSpace(rel.Manifest) + "\n")
	for _, hook := range rel.Hooks {
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", hook.Path, hook.Manifest)
	}
	return out.String(), nil
}

// object is one rendered object, decoded.
type object struct {
	kind, name string
	source     string // the template it came from
	yaml       string
	value      any // a pointer to the API type
}

// objects are a rendering's objects.
type objects []object

// apiTypes are the kinds the chart may render, as their API version and
// kind, each with a constructor of its Go type.
var apiTypes = map[string]func() any{
	"v1 ConfigMap":                            func() any { return new(corev1.ConfigMap) },
	"v1 Secret":                               func() any { return new(corev1.Secret) },
	"v1 Service":                              func() any { return new(corev1.Service) },
	"apps/v1 Deployment":                      func() any { return new(appsv1.Deployment) },
	"batch/v1 Job":                            func() any { return new(batchv1.Job) },
	"policy/v1 PodDisruptionBudget":           func() any { return new(policyv1.PodDisruptionBudget) },
	"autoscaling/v2 HorizontalPodAutoscaler":  func() any { return new(autoscalingv2.HorizontalPodAutoscaler) },
	"networking.k8s.io/v1 Ingress":            func() any { return new(networkingv1.Ingress) },
	"monitoring.coreos.com/v1 ServiceMonitor": func() any { return new(serviceMonitor) },
}

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor
// (a custom resource, not in k8s.io/api) that the chart writes: decoding
// strictly into it fails on anything else.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			Authorization struct {
				Type        string                   `json:"type"`
				Credentials corev1.SecretKeySelector `json:"credentials"`
			} `json:"authorization"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// decode splits a rendering into its objects and decodes each strictly.
func decode(t *testing.T, manifest string) objects {
	t.Helper()
	var objs objects
	for _, doc := range strings.Split(manifest, "\n---\n") {
		source := ""
		for _, line := range strings.Split(doc, "\n") {
			if s, ok := strings.CutPrefix(line, "# Source: "); ok {
				source = s
			}
		}
		var meta metav1.PartialObjectMetadata
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%s: %v", source, err)
		}
		if meta.Kind == "" {
			continue // a template that rendered nothing
		}
		newValue, ok := apiTypes[meta.APIVersion+" "+meta.Kind]
		if !ok {
			t.Fatalf("%s renders %s %s, a kind this test does not know", source, meta.APIVersion, meta.Kind)
		}
		value := newValue()
		if err := yaml.UnmarshalStrict([]byte(doc), value); err != nil {
			t.Fatalf("%s: %s %s does not decode strictly: %v", source, meta.Kind, meta.Name, err)
		}
		objs = append(objs, object{kind: meta.Kind, name: meta.Name, source: source, yaml: doc, value: value})
	}
	return objs
}

// find is the one object of a kind and name.
func find[T any](t *testing.T, objs objects, name string) *T {
	t.Helper()
	var found *T
	for _, o := range objs {
		if v, ok := o.value.(*T); ok && o.name == name {
			if found != nil {
				t.Fatalf("two %T named %s", v, name)
			}
			found = v
		}
	}
	if found == nil {
		t.Fatalf("no %T named %s", found, name)
	}
	return found
}

func all[T any](objs objects) []*T {
	var found []*T
	for _, o := range objs {
		if v, ok := o.value.(*T); ok {
			found = append(found, v)
		}
	}
	return found
}

// checkNodes: the node Deployment and what serves and guards it.
func checkNodes(t *testing.T, objs objects, values map[string]any) {
	t.Helper()
	d := find[appsv1.Deployment](t, objs, "skipq")
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("replicas %v; want 3", d.Spec.Replicas)
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("rolling update %+v; want maxUnavailable 0 (a new node is ready before an old one drains)", ru)
	}
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers; want the node alone", len(pod.Containers))
	}
	c := pod.Containers[0]
	if !slices.Equal(c.Args, []string{"serve"}) || len(c.Command) != 0 {
		t.Errorf("command %q args %q; want the image's entrypoint with serve", c.Command, c.Args)
	}
	checkHTTPProbe(t, "readiness", c.ReadinessProbe, "/readyz")
	checkHTTPProbe(t, "liveness", c.LivenessProbe, "/healthz")
	checkHTTPProbe(t, "startup", c.StartupProbe, "/healthz")

	// The drain: preStop's wait while endpoints update, then the node's
	// 30 s for requests in flight, inside the grace period.
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds < 1 {
		t.Fatalf("preStop %+v; want a sleep (the image has no shell) while endpoints update", c.Lifecycle)
	}
	preStop := c.Lifecycle.PreStop.Sleep.Seconds
	const nodeDrainSeconds = 30 // internal/node: srv.Shutdown's bound
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g < preStop+nodeDrainSeconds+5 {
		t.Errorf("terminationGracePeriodSeconds %v; want at least preStop %d + the node's %d s drain + 5", g, preStop, nodeDrainSeconds)
	}

	checkPodSecurity(t, "the node", pod, 65532)
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the node mounts a service account token it never uses")
	}
	if mem := c.Resources.Limits.Memory(); mem.IsZero() || mem.Value() < 256<<20 {
		t.Errorf("memory limit %v; want at least 256Mi (measured: 98 MB at full load plus 160 MiB of request bodies in flight)", mem)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("requests %v; want cpu and memory (the autoscaler works on the cpu request)", c.Resources.Requests)
	}
	if len(pod.TopologySpreadConstraints) == 0 || pod.TopologySpreadConstraints[0].TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("topology spread %+v; want nodes spread over machines", pod.TopologySpreadConstraints)
	}

	// Configuration: the ConfigMap, with migrations off; secrets by reference.
	cm := find[corev1.ConfigMap](t, objs, "skipq")
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || c.EnvFrom[0].ConfigMapRef.Name != cm.Name {
		t.Errorf("envFrom %+v; want the ConfigMap %s", c.EnvFrom, cm.Name)
	}
	if cm.Data["SKIPQ_MIGRATE"] != "false" {
		t.Errorf("SKIPQ_MIGRATE=%q; want false: the hook Job migrates once, not every replica", cm.Data["SKIPQ_MIGRATE"])
	}
	for _, e := range c.Env {
		if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("env %s is not from a Secret", e.Name)
		}
	}
	if envSecret(c, "SKIPQ_DATABASE_URL") == "" {
		t.Error("SKIPQ_DATABASE_URL is not from a Secret")
	}

	svc := find[corev1.Service](t, objs, "skipq")
	if !selects(svc.Spec.Selector, d.Spec.Template.Labels) || svc.Spec.Ports[0].Port != 8080 {
		t.Errorf("the Service selects %v on %d; want the nodes on 8080", svc.Spec.Selector, svc.Spec.Ports[0].Port)
	}
	pdb := find[policyv1.PodDisruptionBudget](t, objs, "skipq")
	if !selects(pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels) || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("the PodDisruptionBudget %+v; want the nodes, one unavailable at most", pdb.Spec)
	}
	hpa := find[autoscalingv2.HorizontalPodAutoscaler](t, objs, "skipq")
	if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != d.Name ||
		hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas != 3 || len(hpa.Spec.Metrics) != 1 ||
		hpa.Spec.Metrics[0].Resource == nil || hpa.Spec.Metrics[0].Resource.Name != corev1.ResourceCPU {
		t.Errorf("the autoscaler %+v; want the nodes on CPU from 3", hpa.Spec)
	}
}

func checkHTTPProbe(t *testing.T, what string, p *corev1.Probe, path string) {
	t.Helper()
	if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "http" {
		t.Errorf("%s probe %+v; want GET %s on the http port", what, p, path)
	}
}

// checkPodSecurity: non-root, read-only root file system, no privilege to
// gain, every capability dropped, for every container of the pod.
func checkPodSecurity(t *testing.T, what string, pod corev1.PodSpec, uid int64) {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != uid {
		t.Errorf("%s's pod security context %+v; want non-root user %d", what, psc, uid)
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		switch {
		case sc == nil:
			t.Errorf("%s: container %s has no security context", what, c.Name)
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Errorf("%s: container %s's root file system is writable", what, c.Name)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Errorf("%s: container %s may escalate privileges", what, c.Name)
		case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0:
			t.Errorf("%s: container %s keeps capabilities: %+v", what, c.Name, sc.Capabilities)
		case sc.Privileged != nil && *sc.Privileged:
			t.Errorf("%s: container %s is privileged", what, c.Name)
		}
	}
}

// envSecret is the Secret key a variable comes from, "" when it does not.
func envSecret(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return e.ValueFrom.SecretKeyRef.Key
		}
	}
	return ""
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkMigrationJob: one Job, a pre-install and pre-upgrade hook, runs
// `skipq migrate up` over the direct URL; nothing else migrates.
func checkMigrationJob(t *testing.T, objs objects) {
	t.Helper()
	job := find[batchv1.Job](t, objs, "skipq-migrate")
	if hooks := job.Annotations["helm.sh/hook"]; hooks != "pre-install,pre-upgrade" {
		t.Errorf("the migration Job's hooks are %q; want pre-install,pre-upgrade", hooks)
	}
	pod := job.Spec.Template.Spec
	if len(pod.Containers) != 1 || !slices.Equal(pod.Containers[0].Args, []string{"migrate", "up"}) {
		t.Fatalf("the migration Job runs %+v; want skipq migrate up", pod.Containers)
	}
	if key := envSecret(pod.Containers[0], "SKIPQ_DATABASE_URL"); key != "database-url" {
		t.Errorf("the migration Job's database URL is the Secret's %q; want database-url (direct: goose's advisory lock)", key)
	}
	if pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("the migration Job's restart policy is %q; want Never (the Job's backoff retries)", pod.RestartPolicy)
	}
	checkPodSecurity(t, "the migration Job", pod, 65532)
	for _, d := range all[appsv1.Deployment](objs) {
		for _, c := range d.Spec.Template.Spec.Containers {
			if slices.Contains(c.Args, "migrate") {
				t.Errorf("the Deployment %s migrates", d.Name)
			}
		}
	}
}

// checkSecretsStayInSecrets: no secret value in any object but a Secret.
func checkSecretsStayInSecrets(t *testing.T, objs objects) {
	t.Helper()
	for _, o := range objs {
		if o.kind == "Secret" {
			continue
		}
		for _, s := range secretValues {
			if strings.Contains(o.yaml, s) {
				t.Errorf("%s %s (%s) holds a secret", o.kind, o.name, o.source)
			}
		}
	}
	for _, cm := range all[corev1.ConfigMap](objs) {
		for key := range cm.Data {
			for _, word := range []string{"DATABASE_URL", "SECRET", "MASTER_KEY", "TOKEN", "PASSWORD"} {
				if strings.Contains(key, word) {
					t.Errorf("the ConfigMap %s has %s", cm.Name, key)
				}
			}
		}
	}
}

func checkPgBouncer(t *testing.T, objs objects) {
	t.Helper()
	node := find[appsv1.Deployment](t, objs, "skipq").Spec.Template.Spec.Containers[0]
	if envSecret(node, "SKIPQ_DATABASE_URL") != "pooled-database-url" || envSecret(node, "SKIPQ_LISTENER_DATABASE_URL") != "database-url" {
		t.Error("with PgBouncer the nodes' queries must go through it and their LISTEN direct")
	}
	secret := find[corev1.Secret](t, objs, "skipq")
	if pooled := secret.StringData["pooled-database-url"]; pooled != "postgres://skipq:"+dbPassword+"@skipq-pgbouncer:6432/skipq?default_query_exec_mode=cache_describe" {
		t.Errorf("pooled-database-url is %q", pooled)
	}
	config := find[corev1.Secret](t, objs, "skipq-pgbouncer").StringData
	for _, line := range []string{"* = host=db.internal port=5432", "pool_mode = transaction", "auth_type = scram-sha-256"} {
		if !strings.Contains(config["pgbouncer.ini"], line+"\n") {
			t.Errorf("pgbouncer.ini lacks %q:\n%s", line, config["pgbouncer.ini"])
		}
	}
	if strings.TrimSpace(config["userlist.txt"]) != `"skipq" "`+dbPassword+`"` {
		t.Errorf("userlist.txt is %q", config["userlist.txt"])
	}
	bouncer := find[appsv1.Deployment](t, objs, "skipq-pgbouncer")
	checkPodSecurity(t, "PgBouncer", bouncer.Spec.Template.Spec, 70)
	svc := find[corev1.Service](t, objs, "skipq-pgbouncer")
	if !selects(svc.Spec.Selector, bouncer.Spec.Template.Labels) || svc.Spec.Ports[0].Port != 6432 {
		t.Errorf("the PgBouncer Service selects %v on %d", svc.Spec.Selector, svc.Spec.Ports[0].Port)
	}
	if selects(find[corev1.Service](t, objs, "skipq").Spec.Selector, bouncer.Spec.Template.Labels) {
		t.Error("the nodes' Service selects PgBouncer too")
	}
}

func checkTLS(t *testing.T, objs objects) {
	t.Helper()
	ing := find[networkingv1.Ingress](t, objs, "skipq")
	if len(ing.Spec.TLS) != 1 || !slices.Equal(ing.Spec.TLS[0].Hosts, []string{"queues.example.com"}) || ing.Spec.TLS[0].SecretName == "" {
		t.Errorf("the Ingress's TLS is %+v", ing.Spec.TLS)
	}
	cm := find[corev1.ConfigMap](t, objs, "skipq")
	if cm.Data["SKIPQ_PUBLIC_ORIGIN"] != "https://queues.example.com" || cm.Data["SKIPQ_TRUSTED_PROXIES"] != "10.0.0.0/8" {
		t.Errorf("public origin %q, trusted proxies %q; want the https origin and the Ingress's addresses",
			cm.Data["SKIPQ_PUBLIC_ORIGIN"], cm.Data["SKIPQ_TRUSTED_PROXIES"])
	}
	pods := map[string]corev1.PodSpec{
		"the node":          find[appsv1.Deployment](t, objs, "skipq").Spec.Template.Spec,
		"the migration Job": find[batchv1.Job](t, objs, "skipq-migrate").Spec.Template.Spec,
	}
	for what, pod := range pods {
		mounted := false
		for _, m := range pod.Containers[0].VolumeMounts {
			mounted = mounted || (m.MountPath == "/etc/skipq/database-ca" && m.ReadOnly)
		}
		if !mounted {
			t.Errorf("%s does not mount the database's CA read-only at /etc/skipq/database-ca", what)
		}
	}
}

func checkKubeMQ(t *testing.T, objs objects) {
	t.Helper()
	if addr := find[corev1.ConfigMap](t, objs, "skipq").Data["SKIPQ_KUBEMQ_ADDR"]; addr != ":50000" {
		t.Errorf("SKIPQ_KUBEMQ_ADDR=%q; want :50000", addr)
	}
	ports := map[string]int32{}
	for _, p := range find[corev1.Service](t, objs, "skipq").Spec.Ports {
		ports[p.Name] = p.Port
	}
	if ports["grpc-kubemq"] != 50000 || ports["sqs"] != 9324 || ports["http"] != 8080 {
		t.Errorf("the Service's ports are %v; want http 8080, sqs 9324, grpc-kubemq 50000", ports)
	}
	sm := find[serviceMonitor](t, objs, "skipq")
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Path != "/metrics" || sm.Spec.Endpoints[0].Authorization.Credentials.Key != "metrics-token" {
		t.Errorf("the ServiceMonitor scrapes %+v; want /metrics with the metrics token", sm.Spec.Endpoints)
	}
}
