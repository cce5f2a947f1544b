package deploycheck_test

import (
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// composeFile is the part of the Compose specification compose.yaml uses:
// decoding strictly into it fails on a misspelt or misplaced key.
type composeFile struct {
	Name             string                    `json:"name"`
	XNode            map[string]any            `json:"x-node"`
	XNodeEnvironment map[string]string         `json:"x-node-environment"`
	Services         map[string]composeService `json:"services"`
	Volumes          map[string]struct{}       `json:"volumes"`
}

type composeService struct {
	Image           string            `json:"image"`
	Command         []string          `json:"command"`
	User            string            `json:"user"`
	ReadOnly        bool              `json:"read_only"`
	CapDrop         []string          `json:"cap_drop"`
	SecurityOpt     []string          `json:"security_opt"`
	Tmpfs           []string          `json:"tmpfs"`
	StopGracePeriod string            `json:"stop_grace_period"`
	Restart         string            `json:"restart"`
	Environment     map[string]string `json:"environment"`
	Ports           []string          `json:"ports"`
	Volumes         []string          `json:"volumes"`
	DependsOn       map[string]struct {
		Condition string `json:"condition"`
	} `json:"depends_on"`
	Healthcheck *struct {
		Test     []string `json:"test"`
		Interval string   `json:"interval"`
		Timeout  string   `json:"timeout"`
		Retries  int      `json:"retries"`
	} `json:"healthcheck"`
}

func TestComposeFile(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var compose composeFile
	if err := yaml.UnmarshalStrict(raw, &compose); err != nil {
		t.Fatalf("compose.yaml does not decode strictly: %v", err)
	}
	s := compose.Services
	var names []string
	for name := range s {
		names = append(names, name)
	}
	slices.Sort(names)
	if want := []string{"migrate", "node-1", "node-2", "node-3", "pgbouncer", "postgres", "worker"}; !slices.Equal(names, want) {
		t.Fatalf("compose.yaml runs %v; want %v", names, want)
	}

	// The chart's defaults, for the settings both must share.
	chartConfig := find[corev1.ConfigMap](t, decode(t, render(t, nil)), "skipq")
	for _, name := range []string{"migrate", "node-1", "node-2", "node-3", "worker"} {
		svc := s[name]
		if svc.Image != "${SKIPQ_IMAGE:-skipq:dev}" || svc.User != "65532:65532" || !svc.ReadOnly ||
			!slices.Equal(svc.CapDrop, []string{"ALL"}) || !slices.Contains(svc.SecurityOpt, "no-new-privileges:true") {
			t.Errorf("%s: image %q user %q read-only %v cap_drop %v security_opt %v; want skipq's image, non-root, read-only, nothing to gain",
				name, svc.Image, svc.User, svc.ReadOnly, svc.CapDrop, svc.SecurityOpt)
		}
		directKey := "SKIPQ_LISTENER_DATABASE_URL"
		if name == "migrate" {
			directKey = "SKIPQ_DATABASE_URL"
		}
		if direct := composeURL(t, name, svc.Environment, directKey); direct.Host != "postgres:5432" {
			t.Errorf("%s's direct URL goes to %s; want PostgreSQL", name, direct.Redacted())
		}
		if name == "migrate" {
			if !slices.Equal(svc.Command, []string{"migrate", "up"}) || svc.DependsOn["postgres"].Condition != "service_healthy" {
				t.Errorf("migrate runs %q after %+v; want migrate up once PostgreSQL is healthy", svc.Command, svc.DependsOn)
			}
		} else {
			pooled := composeURL(t, name, svc.Environment, "SKIPQ_DATABASE_URL")
			if pooled.Host != "pgbouncer:6432" || pooled.Query().Get("default_query_exec_mode") != "cache_describe" {
				t.Errorf("%s's queries go to %s; want PgBouncer with cache_describe", name, pooled.Redacted())
			}
			if svc.Environment["SKIPQ_MIGRATE"] != "false" || svc.DependsOn["migrate"].Condition != "service_completed_successfully" {
				t.Errorf("%s: SKIPQ_MIGRATE=%q after %+v; want false, after the migration completed",
					name, svc.Environment["SKIPQ_MIGRATE"], svc.DependsOn)
			}
			if grace, err := time.ParseDuration(svc.StopGracePeriod); err != nil || grace < 35*time.Second {
				t.Errorf("%s's stop_grace_period is %q; want room for the node's 30 s drain", name, svc.StopGracePeriod)
			}
			if svc.Environment["SKIPQ_DB_MAX_CONNS"] != chartConfig.Data["SKIPQ_DB_MAX_CONNS"] {
				t.Errorf("%s's pool is %q; the chart's %q", name, svc.Environment["SKIPQ_DB_MAX_CONNS"], chartConfig.Data["SKIPQ_DB_MAX_CONNS"])
			}
			wantRole := "api"
			if name == "worker" {
				wantRole = "worker"
			}
			if svc.Environment["SKIPQ_ROLE"] != wantRole {
				t.Errorf("%s's role is %q; want %s", name, svc.Environment["SKIPQ_ROLE"], wantRole)
			}
		}
	}

	// PgBouncer's settings are the chart's, but for the server's address.
	ini, err := os.ReadFile("../../deploy/compose/pgbouncer.ini")
	if err != nil {
		t.Fatal(err)
	}
	chartIni := find[corev1.Secret](t, decode(t, render(t, variants["pgbouncer"])), "skipq-pgbouncer").StringData["pgbouncer.ini"]
	if got, want := pgbouncerSettings(string(ini)), pgbouncerSettings(chartIni); !slices.Equal(got, want) {
		t.Errorf("compose/pgbouncer.ini sets %q; the chart %q", got, want)
	}
	if !slices.Contains(s["pgbouncer"].Volumes, "./compose/pgbouncer.ini:/etc/pgbouncer/pgbouncer.ini:ro") {
		t.Errorf("PgBouncer mounts %v; want compose/pgbouncer.ini", s["pgbouncer"].Volumes)
	}
}

func composeURL(t *testing.T, service string, env map[string]string, key string) *url.URL {
	t.Helper()
	u, err := url.Parse(env[key])
	if err != nil || u.Scheme != "postgres" {
		t.Fatalf("%s's %s is %q (%v); want a postgres URL", service, key, env[key], err)
	}
	return u
}

// pgbouncerSettings are a pgbouncer.ini's setting lines, less comments and
// the [databases] entry that names the server.
func pgbouncerSettings(ini string) []string {
	var settings []string
	for _, line := range strings.Split(ini, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, ";") || strings.HasPrefix(line, "* = host=") {
			continue
		}
		settings = append(settings, line)
	}
	return settings
}
