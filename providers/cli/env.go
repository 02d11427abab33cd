package cli

import (
	"os"
	"sort"
	"strings"
)

// passedEnv are the variables a CLI inherits from the gateway: what a program needs to find
// executables, its home (where the CLIs keep their logins) and temp files, and to pick a
// locale and proxy. Nothing else passes: the gateway's environment holds API keys for every
// backend, and a CLI should see only the ones its provider's config gives it.
var passedEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
	"TMPDIR", "TMP", "TEMP",
	"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR",
	"HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
}

// buildEnv returns the child's environment: passedEnv from getenv, then the dialect's
// defaults, then the configured env (which wins). Sorted, so runs are reproducible.
func buildEnv(getenv func(string) (string, bool), defaults, configured map[string]string) []string {
	if getenv == nil {
		getenv = os.LookupEnv
	}
	env := map[string]string{}
	for _, k := range passedEnv {
		if v, ok := getenv(k); ok {
			env[k] = v
		}
	}
	for k, v := range defaults {
		env[k] = v
	}
	for k, v := range configured {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// validEnvName reports whether name can be an environment variable name.
func validEnvName(name string) bool {
	return name != "" && !strings.ContainsAny(name, "=\x00")
}
