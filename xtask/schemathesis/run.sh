#!/usr/bin/env bash
# Schemathesis against a running Gantry, as every role: does GET /api/openapi.json describe
# what the server does? (issue 42, item 6)
#
# Every check (-c all: server errors, status codes, content types, response headers and
# schemas, negative data rejected, positive data accepted, missing auth refused, ...), in
# every phase (coverage, fuzzing, stateful), bounded by --max-examples per operation and a
# wall-clock cap per role. Exits non-zero when any role has a failure or could not run.
#
# Environment:
#   GANTRY_ST_BASE_URL         required, e.g. http://127.0.0.1:3000 (the server must have
#                              anonymous_read off, its default: the document's `security`
#                              says a session is needed)
#   GANTRY_ST_VIEWER, GANTRY_ST_OPERATOR, GANTRY_ST_MANAGER, GANTRY_ST_ADMIN
#                              each role's `gantry_session` cookie value (sign in with
#                              curl -c JAR -d 'name=U&password=P' $BASE/auth/login)
#   GANTRY_ST_INGEST_TOKEN     an ingest bearer token (gantry token add NAME)
#   GANTRY_ST_ROLES            default "anonymous ingest viewer operator manager admin";
#                              a role named here without its credential is a failure
#   GANTRY_ST_SCHEMATHESIS     default: /var/tmp/gantry-schemathesis-venv/bin/schemathesis,
#                              else `schemathesis` on PATH (pip install -r requirements.txt)
#   GANTRY_ST_MAX_EXAMPLES     default 25 test cases per operation and phase
#   GANTRY_ST_SEED             default 1 (the same seed: the same requests)
#   GANTRY_ST_WORKERS          default 1 (with 2, schemathesis 4.32.5 on Python 3.11 can
#                              stop an operation with "AST constructor recursion depth
#                              mismatch", a thread race inside hypothesis, on anyOf bodies)
#   GANTRY_ST_ROLE_TIMEOUT     default 600 seconds per pass (a pass killed is a failure)
#   GANTRY_ST_OUT              where reports and logs go; default a new directory under
#                              ${TMPDIR:-/tmp} (schemathesis also keeps its caches there,
#                              never in the checkout)
#   GANTRY_ST_EXTRA            extra arguments for every `schemathesis run` (word-split)
#   GANTRY_ST_SCHEMA           default $GANTRY_ST_BASE_URL/api/openapi.json; or a file (a
#                              document edited by hand, to try a fix before making it)
#
# Roles: `anonymous` runs every operation with no credential; `ingest` runs /api/ingest/*
# with the bearer token; the session roles run every operation with their cookie (so
# what a role may not call must answer 401/403 in the envelope).
#
# The admin runs in two passes. The operations that can end the admin's own session
# (revoke a session, disable, delete or change the role of a user) run last and on their
# own: in a pass with GET /api/admin/sessions and /api/admin/users, the stateful phase
# feeds the ids and names those list (the admin's own included) into them, and the rest
# of the pass then gets 401s. They still change state: on a random name they answer 404,
# and anything they do reach (a user or session created for the run) is the run's to lose.
# Run this against a throwaway database, after the other roles.
#
# Output: the schemathesis log of each pass in $GANTRY_ST_OUT/<pass>.log, its JUnit and
# NDJSON reports in $GANTRY_ST_OUT/<pass>/, and one line per pass on stdout.
set -u

base=${GANTRY_ST_BASE_URL:?set GANTRY_ST_BASE_URL, e.g. http://127.0.0.1:3000}
base=${base%/}
schema=${GANTRY_ST_SCHEMA:-$base/api/openapi.json}
location=(--url "$base")
case $schema in
    http://* | https://*) location=() ;;
    *) schema=$(cd "$(dirname "$schema")" && pwd)/$(basename "$schema") ;;
esac
roles=${GANTRY_ST_ROLES:-anonymous ingest viewer operator manager admin}
max_examples=${GANTRY_ST_MAX_EXAMPLES:-25}
seed=${GANTRY_ST_SEED:-1}
workers=${GANTRY_ST_WORKERS:-1}
role_timeout=${GANTRY_ST_ROLE_TIMEOUT:-600}
st=${GANTRY_ST_SCHEMATHESIS:-}
if [ -z "$st" ]; then
    if [ -x /var/tmp/gantry-schemathesis-venv/bin/schemathesis ]; then
        st=/var/tmp/gantry-schemathesis-venv/bin/schemathesis
    else
        st=$(command -v schemathesis || true)
    fi
fi
if [ -z "$st" ] || [ ! -x "$st" ]; then
    echo "schemathesis not found: pip install -r xtask/schemathesis/requirements.txt into a venv, or set GANTRY_ST_SCHEMATHESIS" >&2
    exit 2
fi
out=${GANTRY_ST_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/gantry-schemathesis.XXXXXX")}
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
# shellcheck disable=SC2206
extra=(${GANTRY_ST_EXTRA:-})

# The operations that can end the admin's own session; the admin's second pass.
self_harm='^/api/admin/(sessions/\{id\}/revoke|users/\{name\}/(delete|disable|role))$'

failed=0

# run PASS CONFIG_TOML [schemathesis filter args...]: one schemathesis run, one line.
run() {
    local pass=$1 config=$2
    shift 2
    local cfg="$out/$pass.toml" log="$out/$pass.log" start rc line
    printf '%s' "$config" >"$cfg"
    start=$(date +%s)
    (
        # Caches (.hypothesis, .schemathesis) land in the working directory: not the checkout.
        cd "$out" || exit 2
        exec timeout --kill-after=10 "$role_timeout" "$st" --config-file "$cfg" run "$schema" ${location[@]+"${location[@]}"} \
            --checks all --max-examples "$max_examples" --seed "$seed" --workers "$workers" \
            --request-timeout 10 --generation-database none --no-color \
            --report junit,ndjson --report-dir "$out/$pass" "$@" ${extra[@]+"${extra[@]}"}
    ) >"$log" 2>&1
    rc=$?
    line=$(grep -E '^=+ .* in [0-9.]+s =+$' "$log" | tail -n 1 | sed -E 's/^=+ //; s/ =+$//')
    case $rc in
        0) printf '%-18s ok      %s (%ss)\n' "$pass" "${line:-?}" "$(($(date +%s) - start))" ;;
        124 | 137) printf '%-18s FAILED  killed after %ss (GANTRY_ST_ROLE_TIMEOUT); log %s\n' "$pass" "$role_timeout" "$log" ;;
        *) printf '%-18s FAILED  %s (exit %s, %ss); log %s\n' "$pass" "${line:-no summary: see the log}" "$rc" "$(($(date +%s) - start))" "$log" ;;
    esac
    [ "$rc" -eq 0 ] || failed=1
}

# The one rule the document cannot state: a report's custom period is at most 400 days,
# reliability's period at most 92 (`from` and `to` are each a valid date; OpenAPI has no
# way to bound one parameter by another). Those four operations answer such a period with
# a 400 and the rule in words, and only there is a 400 a right answer to schema-valid data.
period_rule='
[[operations]]
include-path-regex = "^/api/(reports|reliability)(/charts/\\{file\\})?$"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]
'

session_config() {
    # The cookie is the document's `session` scheme, so schemathesis also knows to send
    # requests without it (and expects 401) - a plain -H Cookie would be sent on those too.
    printf '[auth.openapi.session]\napi_key = "${%s}"\n%s' "$1" "$period_rule"
}

for role in $roles; do
    case $role in
        anonymous)
            run anonymous ''
            ;;
        ingest)
            if [ -z "${GANTRY_ST_INGEST_TOKEN:-}" ]; then
                printf '%-18s FAILED  GANTRY_ST_INGEST_TOKEN is not set\n' ingest
                failed=1
                continue
            fi
            run ingest "$(printf '[auth.openapi.ingest_token]\nbearer = "${GANTRY_ST_INGEST_TOKEN}"\n')" \
                --include-path-regex '^/api/ingest/'
            ;;
        viewer | operator | manager | admin)
            var=GANTRY_ST_$(printf '%s' "$role" | tr '[:lower:]' '[:upper:]')
            if [ -z "${!var:-}" ]; then
                printf '%-18s FAILED  %s is not set\n' "$role" "$var"
                failed=1
                continue
            fi
            if [ "$role" = admin ]; then
                run admin "$(session_config "$var")" --exclude-path-regex "$self_harm"
                run admin-self-harm "$(session_config "$var")" --include-path-regex "$self_harm"
            else
                run "$role" "$(session_config "$var")"
            fi
            ;;
        *)
            printf '%-18s FAILED  unknown role (anonymous ingest viewer operator manager admin)\n' "$role"
            failed=1
            ;;
    esac
done

echo "reports and logs: $out"
exit "$failed"
