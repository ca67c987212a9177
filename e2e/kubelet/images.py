"""Container images made without a registry, imported into containerd with ``ctr``.

The busybox image is Debian's busybox-static binary plus its applet links, written as a
docker-archive (``manifest.json``, a config and one layer) that ``ctr images import``
reads. The same image is the pod sandbox ("pause") image: its entrypoint sleeps.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

BUSYBOX_IMAGE = "dra-quota.test/busybox:testbed"
# The sandbox image: busybox sleeping as PID 1 (SIGKILLed when the pod sandbox stops).
PAUSE_IMAGE = "dra-quota.test/pause:testbed"
BUSYBOX_BINARY = Path("/bin/busybox")
# What the pods here run; each becomes a link to busybox in /bin.
APPLETS = ("sh", "env", "echo", "sleep", "cat", "ls", "test", "true", "false", "printenv", "grep", "wget")


def _layer(busybox: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("bin", "tmp", "etc", "proc", "sys", "dev"):
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
        data = busybox.read_bytes()
        info = tarfile.TarInfo("bin/busybox")
        info.size = len(data)
        info.mode = 0o755
        tar.addfile(info, io.BytesIO(data))
        for applet in APPLETS:
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type = tarfile.SYMTYPE
            info.linkname = "busybox"
            tar.addfile(info)
        for name, text in (("etc/passwd", "root:x:0:0:root:/:/bin/sh\n"), ("etc/group", "root:x:0:\n")):
            raw = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(raw))
    return buf.getvalue()


def busybox_archive(path: Path, busybox: Path = BUSYBOX_BINARY) -> Path:
    """Write a docker-archive holding BUSYBOX_IMAGE and PAUSE_IMAGE (one layer, two configs)."""
    if not busybox.is_file():
        raise FileNotFoundError(f"{busybox} not found: install Debian's busybox-static")
    layer = _layer(busybox)
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    manifest = []
    files: dict[str, bytes] = {"layer.tar": layer}
    for tag, cmd in ((BUSYBOX_IMAGE, ["sh"]), (PAUSE_IMAGE, ["/bin/sleep", "2147483647"])):
        config = json.dumps(
            {
                "architecture": "amd64",
                "os": "linux",
                "config": {"Env": ["PATH=/bin"], "Cmd": cmd, "WorkingDir": "/"},
                "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            },
            sort_keys=True,
        ).encode()
        name = hashlib.sha256(config).hexdigest() + ".json"
        files[name] = config
        manifest.append({"Config": name, "RepoTags": [tag], "Layers": ["layer.tar"]})
    files["manifest.json"] = json.dumps(manifest).encode()
    with tarfile.open(path, "w") as tar:
        for name, raw in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(raw))
    return path


def import_archive(ctr: Path, address: Path, archive: Path) -> str:
    """``ctr -n k8s.io images import`` (the CRI's namespace); returns ctr's output."""
    result = subprocess.run(
        [str(ctr), "--address", str(address), "-n", "k8s.io", "images", "import", str(archive)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        raise RuntimeError(f"ctr images import {archive} failed: {result.stderr.strip()}")
    return result.stdout
