"""deploy/ checked offline: every manifest against the Kubernetes schemas (kubernetes-validate),
the KubeSchedulerConfiguration field by field, least-privilege RBAC, hardened pods, flags the CLI
accepts, and a Dockerfile that pins its base and runs as non-root."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlparse

import kubernetes_validate
import pytest
import typer
import yaml

from hetsched.tail.cli import app as tail_app
from hetsched.tail.extender import scheduler_config
from hetsched.tail.scheduler_loop import SCHEDULER_NAME
from hetsched.tail.scoring import EXTENDER_WEIGHT

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
# The oldest and newest Kubernetes versions the manifests must be valid for (schemas shipped with
# kubernetes-validate, so no network).
KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")
SCHEDULER_CONFIG = DEPLOY / "extender" / "scheduler-config.yaml"
# Fields of kubescheduler.config.k8s.io/v1 (k8s.io/kube-scheduler/config/v1/types.go).
SCHEDULER_CONFIG_FIELDS = {
    "apiVersion",
    "kind",
    "parallelism",
    "leaderElection",
    "clientConnection",
    "percentageOfNodesToScore",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "profiles",
    "extenders",
    "delayCacheUntilActive",
    "enableProfiling",
    "enableContentionProfiling",
}
EXTENDER_FIELDS = {
    "urlPrefix",
    "filterVerb",
    "preemptVerb",
    "prioritizeVerb",
    "weight",
    "bindVerb",
    "enableHTTPS",
    "tlsConfig",
    "httpTimeout",
    "nodeCacheCapable",
    "managedResources",
    "ignorable",
}
TLS_FIELDS = {
    "insecure",
    "serverName",
    "certFile",
    "keyFile",
    "caFile",
    "certData",
    "keyData",
    "caData",
}
EXPECTED_RULES = {
    "hetsched-tail-extender": {("", "nodes", "get"), ("", "nodes", "list"), ("", "nodes", "watch")},
    "hetsched-tail-scheduler": {
        ("", "pods", "get"),
        ("", "pods", "list"),
        ("", "pods", "watch"),
        ("", "pods/binding", "create"),
        ("", "events", "create"),
        ("", "events", "patch"),
        ("", "nodes", "get"),
        ("", "nodes", "list"),
        ("", "nodes", "watch"),
    },
}


def manifests() -> list[tuple[str, dict]]:
    """(file, document) for every Kubernetes object under deploy/."""
    found = []
    for path in sorted(DEPLOY.rglob("*.yaml")):
        if path == SCHEDULER_CONFIG:
            continue
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                found.append((str(path.relative_to(DEPLOY)), document))
    return found


def objects(kind: str) -> list[dict]:
    return [doc for _, doc in manifests() if doc["kind"] == kind]


def test_there_are_manifests_for_both_modes():
    kinds = {(path.split("/")[0], doc["kind"]) for path, doc in manifests()}
    for mode in ("extender", "scheduler"):
        for kind in ("Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"):
            assert (mode, kind) in kinds
    assert ("extender", "Service") in kinds and ("namespace.yaml", "Namespace") in kinds


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize(("path", "document"), manifests(), ids=lambda v: str(v)[:60])
def test_every_manifest_matches_the_kubernetes_schema(path, document, version):
    kubernetes_validate.validate(document, version, strict=True)


def test_the_schema_check_catches_a_bad_manifest():
    deployment = objects("Deployment")[0]
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = 7
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSIONS[0], strict=True)


def test_rbac_is_least_privilege():
    roles = {role["metadata"]["name"]: role for role in objects("ClusterRole")}
    assert set(roles) == set(EXPECTED_RULES)
    for name, role in roles.items():
        granted = set()
        for rule in role["rules"]:
            assert set(rule) <= {"apiGroups", "resources", "verbs"}, "no resourceNames/URLs"
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    granted.update((group, resource, verb) for verb in rule["verbs"])
        assert not any("*" in part for grant in granted for part in grant)
        assert granted == EXPECTED_RULES[name]
    accounts = {
        (a["metadata"]["namespace"], a["metadata"]["name"]) for a in objects("ServiceAccount")
    }
    for binding in objects("ClusterRoleBinding"):
        assert binding["roleRef"]["name"] in roles
        for subject in binding["subjects"]:
            assert (subject["namespace"], subject["name"]) in accounts
    assert objects("Role") == objects("RoleBinding") == []


def test_pods_run_non_root_without_privileges():
    accounts = {a["metadata"]["name"] for a in objects("ServiceAccount")}
    for deployment in objects("Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] in accounts
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] > 0
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        assert not pod.get("hostNetwork") and not pod.get("hostPID")
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False
            assert context["readOnlyRootFilesystem"] is True
            assert context["capabilities"]["drop"] == ["ALL"]
            assert not context.get("privileged")
            assert "memory" in container["resources"]["limits"]


def command_options(name: str) -> set[str]:
    command = typer.main.get_command(tail_app).commands[name]
    return {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}


def test_deployments_pass_flags_the_commands_accept():
    commands = {}
    for deployment in objects("Deployment"):
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        command = container.get("command", ["hetsched", "tail", "extender"])
        assert command[:2] == ["hetsched", "tail"]
        commands[command[2]] = container["args"]
        options = command_options(command[2])
        for arg in container["args"]:
            assert arg.split("=")[0] in options, f"{command[2]} has no option {arg}"
    assert set(commands) == {"extender", "schedule"}
    assert f"--scheduler-name={SCHEDULER_NAME}" in commands["schedule"]
    assert "--in-cluster" in commands["schedule"]


def test_the_service_reaches_the_extender_at_the_configured_address():
    (service,) = objects("Service")
    (deployment,) = [
        d for d in objects("Deployment") if d["metadata"]["name"] == "hetsched-tail-extender"
    ]
    template = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    ports = {p["name"]: p["containerPort"] for p in template["spec"]["containers"][0]["ports"]}
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] in ports
    url = urlparse(yaml.safe_load(SCHEDULER_CONFIG.read_text())["extenders"][0]["urlPrefix"])
    assert (url.hostname, url.port) == (service["spec"]["clusterIP"], port["port"])
    args = template["spec"]["containers"][0]["args"]
    assert f"--port={ports[port['targetPort']]}" in args
    assert (url.scheme == "https") == any(a.startswith("--tls-cert=") for a in args)
    if any(a.startswith("--tls-client-ca=") for a in args):  # the kubelet has no client cert
        container = template["spec"]["containers"][0]
        for probe in ("readinessProbe", "livenessProbe"):
            assert "httpGet" not in container[probe]


def test_the_kube_scheduler_configuration():
    config = yaml.safe_load(SCHEDULER_CONFIG.read_text())
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert set(config) <= SCHEDULER_CONFIG_FIELDS
    assert set(config["clientConnection"]) <= {
        "kubeconfig",
        "acceptContentTypes",
        "contentType",
        "qps",
        "burst",
    }
    (extender,) = config["extenders"]
    assert set(extender) <= EXTENDER_FIELDS
    assert set(extender["tlsConfig"]) <= TLS_FIELDS
    assert urlparse(extender["urlPrefix"]).scheme in ("http", "https")
    assert extender["enableHTTPS"] is (urlparse(extender["urlPrefix"]).scheme == "https")
    assert isinstance(extender["weight"], int) and extender["weight"] > 0
    assert isinstance(extender["nodeCacheCapable"], bool)
    assert extender["ignorable"] is True  # fail open
    assert re.fullmatch(r"\d+(ms|s|m)", extender["httpTimeout"])
    # The same verbs, weight and timeout as the extender's own --print-config.
    printed = yaml.safe_load(scheduler_config(extender["urlPrefix"], False))["extenders"][0]
    for field in (
        "filterVerb",
        "prioritizeVerb",
        "weight",
        "ignorable",
        "httpTimeout",
        "enableHTTPS",
    ):
        assert extender[field] == printed[field]
    assert extender["weight"] == EXTENDER_WEIGHT


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of deploy/Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    instructions = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def test_the_dockerfile_pins_its_base_and_runs_as_non_root():
    instructions = dockerfile_instructions()
    bases = [args.split()[0] for keyword, args in instructions if keyword == "FROM"]
    assert bases and all(re.fullmatch(r"python:3\.11\.\d+-slim-[a-z]+", b) for b in bases)
    final_stage = instructions[max(i for i, (k, _) in enumerate(instructions) if k == "FROM") :]
    users = [args for keyword, args in final_stage if keyword == "USER"]
    assert users, "the final stage sets no USER (it would run as root)"
    user = users[-1].split(":")[0]
    assert user.isdigit() and int(user) != 0
    runs = " ".join(args for keyword, args in instructions if keyword == "RUN")
    assert "torch==2.13.0" in runs and "download.pytorch.org/whl/cpu" in runs
    assert '".[tail]"' in runs
    entrypoint = [json.loads(args) for keyword, args in instructions if keyword == "ENTRYPOINT"]
    assert entrypoint == [["hetsched", "tail", "extender"]]
    (cmd,) = [json.loads(args) for keyword, args in instructions if keyword == "CMD"]
    flags = {arg for arg in cmd if arg.startswith("--")}
    assert {"--host", "--repo"} <= flags <= command_options("extender")
