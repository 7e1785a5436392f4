"""Test helpers for the scheduler loop: Node and Pod objects, a kubeconfig for the fake API server,
and a self-signed certificate for serving it over TLS."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

import yaml

from hetsched.tail.scheduler_loop import SCHEDULER_NAME


def make_node(
    name, cpu="8", memory="32Gi", freq_ghz="2.3", labels=None, taints=None, cordoned=False
):
    return {
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "hetsched.io/cpu-freq-ghz": freq_ghz}
            | (labels or {}),
        },
        "spec": {"taints": taints or [], "unschedulable": cordoned},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
    }


def make_pod(name, cpu="1", memory="1Gi", model="resnet50", created="2025-01-01T00:00:00Z", **spec):
    annotations = {"hetsched.io/model": model} if model else {}
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "creationTimestamp": created,
            "annotations": annotations,
        },
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "containers": [
                {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
            ],
            **spec,
        },
        "status": {"phase": "Pending"},
    }


def write_kubeconfig(path: Path, server: str, token: str, ca_file: Path | None = None) -> Path:
    """A kubeconfig with one context: ``server`` with a bearer token (and a CA for https)."""
    cluster: dict = {"server": server}
    if ca_file is not None:
        cluster["certificate-authority"] = str(ca_file)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": cluster}],
        "users": [{"name": "scheduler", "user": {"token": token}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "scheduler"}}],
        "current-context": "fake",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    """A certificate (its own CA) for 127.0.0.1 and its key: (cert, key) PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-apiserver")])
    now = datetime.datetime.now(datetime.UTC)
    san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(san, critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "apiserver.pem", folder / "apiserver.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path
